# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one error of the collection's filters (plugins/filter/*.py) and the wrapper every filter goes through.

Each filter is declared with ``ds4_filter(name, input_type)``: an input of another type, and any ValueError,
TypeError, KeyError, AttributeError, IndexError or AnsibleFilterError of the logic it calls, is raised as
``Ds4FilterError`` with a message that starts with the filter's FQCN and says what is wrong."""

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

COLLECTION = 'dgxspark.ds4'


class Ds4FilterError(AnsibleFilterError):
    """Raised by every filter of dgxspark.ds4 on bad input; the message names the filter and what is wrong."""


def _type_ok(value: Any, input_type: str) -> bool:
    if input_type == 'dict':
        return isinstance(value, Mapping)
    if input_type == 'list':
        return isinstance(value, Sequence) and not isinstance(value, (str, bytes))
    if input_type == 'str':
        return isinstance(value, str)
    return True  # raw


def ds4_filter(name: str, input_type: str = 'raw',
               none_ok: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a filter: its name (published as dgxspark.ds4.<name>) and the type of its input (dict, list, str or
    raw; none_ok: None is accepted too, as an empty input)."""
    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def run(value: Any, *args: Any, **kwargs: Any) -> Any:
            if not (value is None and none_ok) and not _type_ok(value, input_type):
                raise Ds4FilterError('%s.%s: the input must be a %s, got %s'
                                     % (COLLECTION, name, input_type, type(value).__name__))
            try:
                return func(value, *args, **kwargs)
            except Ds4FilterError:
                raise
            except (AnsibleFilterError, ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
                raise Ds4FilterError('%s.%s: %s' % (COLLECTION, name, exc)) from exc
        run.ds4_filter_name = name  # type: ignore[attr-defined]  # a function attribute, read by filter_map
        return run
    return wrap


def filter_map(*funcs: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    """FilterModule.filters() of a file: {name: filter} of the filters declared with ds4_filter."""
    return {getattr(func, 'ds4_filter_name'): func for func in funcs}  # the attribute ds4_filter sets
