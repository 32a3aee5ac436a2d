# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The unpinned inputs site.yml prints once per run, each with the variable and command that pin it."""


import os

import yaml

from ansible_collections.dgxspark.ds4.plugins.plugin_utils.unpinned import unpinned

SITE = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'playbooks', 'site.yml')
REPO_ID = 'deepseek-ai/DeepSeek-V4-Flash'
DIGEST = 'sha256:' + 'a' * 64


def eff(revision=None, ref='vllm/vllm-openai:v0.27.1', model_name='deepseek-v4-flash'):
    return {'model_name': model_name, 'model': {'repo_id': REPO_ID, 'revision': revision}, 'image': {'ref': ref}}


def test_revision_null_and_a_tag_are_both_named_with_their_pin():
    lines = unpinned(eff())
    assert len(lines) == 2, lines
    rev, img = lines
    assert rev.startswith('model revision of %s: null' % REPO_ID)
    assert 'ds4_model_revisions: {deepseek-v4-flash: <40-hex commit>}' in rev
    assert 'git ls-remote https://huggingface.co/%s refs/heads/main' % REPO_ID in rev
    assert img.startswith('image vllm/vllm-openai:v0.27.1: a tag, not a digest')
    assert 'ds4_site_overrides.image.ref: vllm/vllm-openai:v0.27.1@sha256:<digest>' in img
    assert '`docker images --digests vllm/vllm-openai`' in img


def test_pinned_inputs_print_nothing():
    assert unpinned(eff('0123456789abcdef0123456789abcdef01234567', 'vllm/vllm-openai:v0.27.1@' + DIGEST)) == []
    assert unpinned(eff('0123456789abcdef0123456789abcdef01234567', 'vllm/vllm-openai@' + DIGEST)) == []


def test_sources_change_the_wording_or_the_need():
    # a local model copy: served as it is; a built or loaded image has no registry digest to pin
    lines = unpinned(eff(ref='dgxspark-ds4/vllm:local'), model_source='local', image_source='build')
    assert len(lines) == 1 and 'the copy in model_cache_local_dir is served as it is' in lines[0]
    assert unpinned(eff(model_name=None))[0].count('ds4_site_overrides.model.revision') == 1
    assert unpinned({}) == []


def test_site_prints_them_once_per_run_before_the_deploy():
    with open(SITE) as fh:
        plays = yaml.safe_load(fh)
    deploy = [p for p in plays if p.get('name') == 'Deploy the pair'][0]
    first = deploy['tasks'][0]
    assert first['run_once'] is True and 'ansible.builtin.debug' in first
    assert 'dgxspark.ds4.unpinned_inputs' in first['vars']['_ds4_unpinned']
    assert first['when'] == '_ds4_unpinned | length > 0'
