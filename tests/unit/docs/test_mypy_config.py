# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mypy.ini (run by `make lint`): the section of fully annotated files names files that exist, sorted, each with
every function annotated (an ast read, independent of mypy), and that section is the strict one."""

import ast
import configparser
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
PREFIX = 'ansible_collections.dgxspark.ds4.'
STRICT = ('disallow_untyped_defs', 'disallow_incomplete_defs', 'check_untyped_defs')


def _config():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, 'mypy.ini'))
    return parser


def _strict_modules(parser):
    for section in parser.sections():
        if section.startswith('mypy-' + PREFIX) and all(parser.getboolean(section, k, fallback=False) for k in STRICT):
            return section[len('mypy-'):].split(',')
    return []


def unannotated(source):
    """Names of the functions of `source` missing a return or a parameter annotation (self/cls excepted)."""
    missing = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            args += [a for a in (node.args.vararg, node.args.kwarg) if a is not None]
            bare = [a.arg for a in args if a.annotation is None and a.arg not in ('self', 'cls')]
            if node.returns is None or bare:
                missing.append(node.name)
    return missing


def test_the_strict_section_lists_existing_sorted_modules():
    modules = _strict_modules(_config())
    assert len(modules) >= 10, modules
    assert modules == sorted(modules)
    for name in modules:
        path = os.path.join(ROOT, *name[len(PREFIX):].split('.')) + '.py'
        assert os.path.isfile(path), (name, path)


def test_every_function_of_a_strict_module_is_annotated():
    for name in _strict_modules(_config()):
        with open(os.path.join(ROOT, *name[len(PREFIX):].split('.')) + '.py') as handle:
            assert unannotated(handle.read()) == [], name


def test_the_annotation_check_sees_a_missing_hint():
    assert unannotated('def f(x) -> int:\n    return x\n') == ['f']
    assert unannotated('def g(x: int):\n    return x\n') == ['g']
    assert unannotated('class C:\n    def m(self, y: int) -> int:\n        return y\n') == []


def test_make_lint_runs_mypy_with_this_config():
    with open(os.path.join(ROOT, 'Makefile')) as handle:
        text = handle.read()
    lint = text.split('\nlint:', 1)[1].split('\n\n', 1)[0]
    assert 'mypy --config-file $(CURDIR)/mypy.ini' in lint, lint
