# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


class ModuleDocFragment(object):
    """Options of the modules that talk to the vLLM OpenAI-compatible endpoint (vllm_bench, vllm_validate, vllm_status).

    DOCUMENTATION: the endpoint (url, api_key). MODEL: the served model name of each request."""

    DOCUMENTATION = r'''
options:
  url:
    description:
      - Base URL of the endpoint, for example V(http://127.0.0.1:8000) (the head's local API; the playbooks
        default to it and take C(ds4_endpoint_url) for another address).
    type: str
    required: true
  api_key:
    description:
      - Bearer key for C(/v1) requests, sent in the C(Authorization) header as C(Bearer <key>) (vLLM guards only
        C(/v1), C(/v2), C(/inference) and C(/cohere)). Never logged.
    type: str
'''

    MODEL = r'''
options:
  model:
    description: Served model name (C(model) of each request; the profile's C(--served-model-name)).
    type: str
    required: true
'''
