# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Recorder of real vLLM (and of the simulator) in the collection's two-rank layout (TEST CODE ONLY)."""
