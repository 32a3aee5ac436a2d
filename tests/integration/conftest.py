# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the router tests (test_router_sim.py, test_router_drain.py); the rig itself is router_rig.py.

router_bin: the vllm-router binary (router_rig.find_router); without one the tests skip, saying why, and
under CI=true they fail (requirements.txt installs it).
rig: make(**settings) -> ([Sim, Sim], Router) with router_config's argv (settings override its defaults,
extra_args=[...] appends flags); everything it started is stopped after the test."""


import pytest

import router_rig  # pylint: disable=import-error


@pytest.fixture(scope="module")
def router_bin():
    binary, message = router_rig.find_router()
    if binary:
        return binary
    if router_rig.ci():
        pytest.fail("under CI=true: " + message)
    pytest.skip(message)
    return None


@pytest.fixture
def rig(router_bin, tmp_path):  # pylint: disable=redefined-outer-name
    made = {"sims": [], "router": None}

    def make(**settings):
        made["sims"] = [router_rig.Sim(), router_rig.Sim()]
        made["router"] = router_rig.Router(router_bin, made["sims"], tmp_path, **settings)
        return made["sims"], made["router"]
    yield make
    if made["router"]:
        made["router"].stop()
    for sim in made["sims"]:
        sim.stop()
