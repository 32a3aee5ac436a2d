# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Recipes, checkpoints and image families as collection data, and the one resolver that turns a choice into
the recipe layer ds4_config merges.

Pure Python (no Ansible imports). Three catalogues (docs/profiles.md "Recipes, models, images"):

* RECIPES: roles/config/files/recipes/<name>.yml, one file per recipe, the same shape as a user's own
  ``ds4_profile_config`` (seed citations as YAML comments), plus ``model.name`` (a key of MODELS) and
  ``measured_with`` (the checkpoints its figures were measured with). Chosen by ``ds4_profile``.
* MODELS: checkpoints. A revision is a full 40-hex commit only where a cited source published one; none does
  yet, so every revision is None and the site pins it (``ds4_model_revisions``). Chosen by ``ds4_model``
  (default: the recipe's own ``model.name``).
* IMAGE_FAMILIES: what an image family is (where its vLLM lives, which of the container_image role's patches
  apply, whether a derived image is built, its API port convention) and which KV-cache dtypes it has.

Entry points:
  recipe_names(root) -> sorted names;  load_recipe(name, root) -> dict (raises KeyError for an unknown name)
  resolve(inputs, root) -> (layer, choice, errors, warnings)   the recipe layer for ds4_config.merge_layers
  check_choice(merged, choice, errors, warnings)                recipe/model/family mismatches on the merged config
  revision_fix(choice, repo_id) -> str                          which variable pins the revision, how to find it
"""


import copy
import json
import os
import re
from typing import Any

# plugins/module_utils/<this file> -> the collection root (a checkout or an installed collection).
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECIPES_DIR = ('roles', 'config', 'files', 'recipes')
NAME_RE = re.compile(r'^[a-z0-9][a-z0-9.-]{0,62}$')
SHA_RE = re.compile(r'^[0-9a-f]{40}$')

# Keys a recipe file has besides the ds4_profile_config layer keys.
RECIPE_ONLY_KEYS = ('measured_with',)
# Where a model's files go when the recipe gives no path of its own (seed 000 serves /models/<dir>).
MODEL_HOST_ROOT = '/srv/dgxspark-ds4/models'
MODEL_CONTAINER_ROOT = '/models'

# ---------------------------------------------------------------------------------------------- models
# kv_cache_dtypes / speculative_methods: what a cited source ran with this checkpoint ('auto' = vLLM's default,
# the checkpoint's own dtype). A value not listed is refused naming both; add it here with its source.
MODELS: dict[str, dict[str, Any]] = {
    'deepseek-v4-flash': {
        'repo_id': 'deepseek-ai/DeepSeek-V4-Flash',
        # No cited source publishes a full commit of the May checkpoint (seeds 000-002 serve the repo as
        # downloaded); the site pins the one it downloaded (ds4_model_revisions).
        'revision': None,
        # seed 000 header: "official FP8 E4M3, 46 shards, 149 GB".
        'size_gb': 149,
        # seeds 000-002: --served-model-name deepseek-v4-flash.
        'served_model_name': 'deepseek-v4-flash',
        'dir_name': 'DeepSeek-V4-Flash',
        # field notes 2026-11 "Checkpoints": MTP heads; deepseek_mtp (seed 000) / mtp (seed 001).
        'speculative_methods': ('deepseek_mtp', 'mtp'),
        # seeds 000-002: kv-cache-dtype fp8.
        'kv_cache_dtypes': ('auto', 'fp8'),
        'source': 'seed 000 (header), seed 001, field notes 2026-11 "Checkpoints"',
    },
    'deepseek-v4-flash-0731': {
        # field notes 2026-11 "Checkpoints" name the checkpoint DeepSeek-V4-Flash-0731 (DeepSeek's release of
        # 2026-07-31), published beside the May one under deepseek-ai.
        'repo_id': 'deepseek-ai/DeepSeek-V4-Flash-0731',
        # Two different revisions are pinned in public recipes (9e165c30... MiaAI-Lab/SGLang cookbook,
        # 7872f01b... NVIDIA/SparkRing), but no full hash is known here (field notes 2026-11): never invented.
        'revision': None,
        # vllm-ops notes: "48 safetensors shards"; no published size on disk.
        'size_gb': None,
        'served_model_name': 'deepseek-v4-flash-0731',
        'dir_name': 'DeepSeek-V4-Flash-0731',
        # field notes 2026-11: MTP heads removed, the DSpark draft folded in (method dspark, 5-6 tokens).
        'speculative_methods': ('dspark',),
        # vllm-ops notes, peer compose (upstream 0.27.1, 0731 TP=2): --kv-cache-dtype fp8_ds_mla.
        'kv_cache_dtypes': ('auto', 'fp8_ds_mla'),
        'source': 'field notes 2026-11 "Checkpoints"; vllm-ops notes (peer compose, upstream 0.27.1)',
    },
    'deepseek-v4-flash-dspark': {
        # seed 003: the community DSpark checkpoint (Fraser Price), served from its HF cache layout.
        'repo_id': 'fraserprice/DeepSeek-V4-Flash-DSpark',
        'revision': None,
        'size_gb': None,
        # seed 003: --served-model-name deepseek-v4-flash-dspark.
        'served_model_name': 'deepseek-v4-flash-dspark',
        'dir_name': 'DeepSeek-V4-Flash-DSpark',
        # seed 003: --speculative-config {"method":"dspark","num_speculative_tokens":5}.
        'speculative_methods': ('dspark',),
        # seed 003: kv_cache_dtype=nvfp4_ds_mla (1M context), and its 262k fp8 speed baseline.
        'kv_cache_dtypes': ('auto', 'fp8', 'nvfp4_ds_mla'),
        'source': 'seed 003',
    },
}

# ---------------------------------------------------------------------------------------------- image families
# vllm: where the image's vLLM lives (described; the container_image role finds the Python that runs it in the image,
# module image_python, and asks that Python with find_spec).
# patches: the container_image role's runtime pieces; derived_image: whether that role builds a derived image.
# image_source: how the image is obtained (the default of container_image_source): pull from a registry, or local
# (built on the head by hand, never pulled; image_build says how, from the family's source).
# api_port: the port the family's own recipes serve on (a recipe without api.port gets it).
# kv_cache_dtypes: what the family's vLLM has (a dtype not listed is refused naming the family).
# load_formats: the newer load formats (NEW_LOAD_FORMATS) the family has; any recipe may opt into one of them.
NEW_LOAD_FORMATS = ('instanttensor', 'fastsafetensors')
IMAGE_FAMILIES: dict[str, dict[str, Any]] = {
    'eugr-nightly': {
        'description': "spark-arena's nightly of eugr's spark-vllm-docker (SM120 torch + vLLM main)",
        'vllm': "the image's python3 site-packages (a main-branch build, seed 000 build-metadata.yaml)",
        'derived_image': True,
        'image_source': 'pull',  # spark-arena's published nightly tags
        # seed 000 failure #2 (DeepGEMM missing: installed into a derived image) and the GSP-hang mxfp4 fix.
        'patches': {'mxfp4_fix': True, 'deepgemm': True},
        'api_port': 8000,  # seed 000 vllm_serve port 8000
        'kv_cache_dtypes': ('auto', 'fp8'),
        # field notes 2026-11: eugr's images load with instanttensor since the mod of 2026-08-27 (seed 000's May
        # build predates it: pin a later tag before opting in).
        'load_formats': ('instanttensor',),
        'source': 'seed 000; field notes 2026-11',
    },
    'b12x': {
        'description': "sparkrun's DSV4 GB10 image with the B12X kernels and its own entrypoint",
        'vllm': "/opt/env (the image's venv; seed 001 points LD_PRELOAD into /opt/env/lib/python3.12)",
        # The container_image role's patches as they have always applied to every family (the mxfp4 fix is
        # checked against the expected cleanup blocks; DeepGEMM is installed only when the image lacks it).
        'derived_image': True,
        'image_source': 'pull',  # seed 001: aidendle94/sparkrun-vllm-ds4-gb10:production-ready, "pre-built"
        'patches': {'mxfp4_fix': True, 'deepgemm': True},
        'api_port': 8000,  # seed 001 port 8000
        'kv_cache_dtypes': ('auto', 'fp8'),
        'load_formats': (),
        'source': 'seed 001',
    },
    'dspark': {
        'description': 'the DSpark Stage C runtime overlay (vLLM 0.33 base + DSpark and Keys concurrency patches)',
        'vllm': "the image's python3 site-packages with seed 003's overlay files",
        'derived_image': True,
        # seed 003 "Build and run": ./build-dspark-vllm-runtime.sh "builds the Stage C image locally and on the worker"
        # (recipe/Dockerfile.dspark-runtime-overlay, then recipe/nvfp4/Dockerfile.stage-a/-b/-c); no registry has it.
        'image_source': 'local',
        'image_build': ("seed 003 builds it on the head with ./build-dspark-vllm-runtime.sh (the DSpark runtime overlay, "
                        "recipe/Dockerfile.dspark-runtime-overlay, then the NVFP4 stages recipe/nvfp4/Dockerfile.stage-a, "
                        "-stage-b, -stage-c); no registry publishes it"),
        'patches': {'mxfp4_fix': True, 'deepgemm': True},
        'api_port': 8888,  # seed 003 "The API serves at http://HEAD_NODE_IP:8888/v1"
        'kv_cache_dtypes': ('auto', 'fp8', 'nvfp4_ds_mla'),  # seed 003
        'load_formats': (),
        'source': 'seed 003',
    },
    'vllm-openai': {
        'description': 'upstream vllm/vllm-openai release tags (multi-arch, CUDA 13 since v0.20, vllm-project/vllm#42738)',
        'vllm': "the image's python3 (a pip-installed vLLM release; its version is the tag's)",
        # field notes 2026-11 "Upstream vLLM": 0.33.0 vendors DeepGEMM with the SM120 kernels (no build needed);
        # the per-layer mxfp4 release of seed 000 is not in 0.33, which frees once after all layers
        # (model_loader/base_loader.py) - a different loader the patch does not target (unverified on GB10).
        # Nothing to bake in: the tag is run as published.
        'derived_image': False,
        'image_source': 'pull',  # Docker Hub vllm/vllm-openai
        'patches': {'mxfp4_fix': False, 'deepgemm': False},
        'api_port': 8000,
        # field notes 2026-11: KV dtypes fp8_ds_mla / nvfp4_ds_mla in 0.33.0's own source.
        'kv_cache_dtypes': ('auto', 'fp8', 'fp8_ds_mla', 'nvfp4_ds_mla'),
        # field notes 2026-11: load formats instanttensor / fastsafetensors in 0.33.0's own source.
        'load_formats': ('instanttensor', 'fastsafetensors'),
        'min_vllm_version': '0.33.0',
        'source': 'field notes 2026-11 "Upstream vLLM"',
    },
}


def _fmt(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _msg(var: str, value: Any, why: str, fix: str) -> str:
    return '%s = %s: %s. Fix: %s.' % (var, _fmt(value), why, fix)


def recipes_dir(root: str = COLLECTION_ROOT) -> str:
    return os.path.join(root, *RECIPES_DIR)


def recipe_names(root: str = COLLECTION_ROOT) -> list[str]:
    """The shipped recipes (file names under roles/config/files/recipes/), sorted."""
    folder = recipes_dir(root)
    if not os.path.isdir(folder):
        return []
    return sorted(n[:-4] for n in os.listdir(folder) if n.endswith('.yml') and NAME_RE.match(n[:-4]))


def _safe_load(text: str) -> Any:
    import yaml  # controller side only (the config action); not needed by the rest of this module
    try:
        loader = yaml.CSafeLoader
    except AttributeError:  # pragma: no cover - PyYAML without libyaml
        loader = yaml.SafeLoader
    return yaml.load(text, Loader=loader)  # nosec: a safe loader


def load_recipe(name: Any, root: str = COLLECTION_ROOT) -> Any:
    """The recipe `name` as a dict; KeyError when no such recipe ships."""
    if not isinstance(name, str) or name not in recipe_names(root):
        raise KeyError(name)
    with open(os.path.join(recipes_dir(root), name + '.yml')) as handle:
        return _safe_load(handle.read())


def known(kind: str) -> str:
    return ', '.join(sorted(MODELS if kind == 'model' else IMAGE_FAMILIES))


def _pins(value: Any, errors: list[str]) -> dict[str, str | None]:
    """ds4_model_revisions: {model name: 40-hex commit}."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.append(_msg('ds4_model_revisions', value, 'must be a mapping of model name -> 40-hex commit',
                           'write e.g. {deepseek-v4-flash: <commit>} (models: %s)' % known('model')))
        return {}
    out: dict[str, str | None] = {}
    for name, rev in value.items():
        var = 'ds4_model_revisions[%s]' % name
        if name not in MODELS:
            errors.append(_msg(var, rev, 'unknown model', 'use one of: %s' % known('model')))
        elif rev is not None and (not isinstance(rev, str) or not SHA_RE.match(rev)):
            errors.append(_msg(var, rev, 'must be the full 40-hex commit of %s, not a branch, tag or short hash'
                               % MODELS[name]['repo_id'], revision_how(MODELS[name]['repo_id'])))
        else:
            out[name] = rev
    return out


def revision_how(repo_id: str) -> str:
    """How to find the commit of a Hub repository (both ways print the full 40-hex id)."""
    return ('take the commit you downloaded (or want) from https://huggingface.co/%s/commits/main, or print main\'s '
            'with `git ls-remote https://huggingface.co/%s refs/heads/main` or `python3 -c "from huggingface_hub '
            'import HfApi; print(HfApi().model_info(\'%s\').sha)"`' % (repo_id, repo_id, repo_id))


def revision_fix(choice: dict[str, Any], repo_id: str | None) -> tuple[str, str]:
    """(variable to set, how) for an unpinned revision of the chosen model."""
    name = choice.get('model')
    if name:
        var = 'ds4_model_revisions'
        how = ('set %s: {%s: <40-hex commit>} once for the site (group spark vars, e.g. inventories/sample-site/group_vars/spark/site.yml); '
               % (var, name)) + revision_how(str(repo_id))
        return '%s[%s]' % (var, name), how
    return ('ds4_site_overrides.model.revision',
            'set ds4_site_overrides.model.revision to the 40-hex commit; ' + revision_how(repo_id or '<repo>'))


def _model_section(recipe_model: dict[str, Any], model_name: str, own: bool) -> dict[str, Any]:
    """The layer's model section for catalogue model `model_name` (recipe paths kept only for its own model)."""
    spec = MODELS[model_name]
    host_dir = '%s/%s' % (MODEL_HOST_ROOT, spec['dir_name'])
    cont_dir = '%s/%s' % (MODEL_CONTAINER_ROOT, spec['dir_name'])
    section = {'repo_id': spec['repo_id'], 'revision': spec['revision'], 'host_dir': host_dir,
               'container_dir': cont_dir, 'serve_arg': cont_dir}
    if own:
        for key in ('host_dir', 'container_dir', 'serve_arg', 'revision', 'repo_id'):
            if recipe_model.get(key) not in (None, ''):
                section[key] = recipe_model[key]
    return section


def resolve(inputs: dict[str, Any], root: str = COLLECTION_ROOT) -> tuple[Any, dict[str, Any], list[str], list[str]]:
    """(layer, choice, errors, warnings) from ds4_profile / ds4_profile_config / ds4_model / ds4_model_revisions.

    layer: the recipe layer in ds4_profile_config shape (None when it cannot be built); choice: {'recipe', 'model',
    'family', 'own_config', 'measured_with'} for check_choice and ds4_effective."""
    errors: list[str] = []
    warnings: list[str] = []
    name = inputs.get('ds4_profile')
    user = inputs.get('ds4_profile_config')
    choice: dict[str, Any] = {'recipe': None, 'model': None, 'family': None, 'own_config': user is not None, 'measured_with': []}
    if user is not None:
        # The user's own full recipe wins; the name is only a label then.
        if not isinstance(name, str) or not NAME_RE.match(name):
            errors.append(_msg('ds4_profile', name, 'must name the recipe (lower-case letters, digits, . and -)',
                               'set ds4_profile to a label for your ds4_profile_config'))
        if not isinstance(user, dict):
            return user, choice, errors, warnings  # ds4_config.merge_layers names the shape problem
        layer = copy.deepcopy(user)
    else:
        names = recipe_names(root)
        try:
            layer = load_recipe(name, root)
        except KeyError:
            errors.append(_msg('ds4_profile', name, 'unknown recipe',
                               'use one of: %s (roles/config/files/recipes/), or give your own full ds4_profile_config'
                               % ', '.join(names)))
            return None, choice, errors, warnings
        choice['recipe'] = name
        if not isinstance(layer, dict):
            errors.append(_msg('recipe %s' % name, layer, 'the recipe file is not a mapping', 'restore it from the collection'))
            return None, choice, errors, warnings
    measured = layer.pop('measured_with', None) or []
    choice['measured_with'] = list(measured) if isinstance(measured, list) else []
    pins = _pins(inputs.get('ds4_model_revisions'), errors)
    model_value = layer.get('model')
    recipe_model: dict[str, Any] = model_value if isinstance(model_value, dict) else {}
    own = recipe_model.get('name')
    wanted = inputs.get('ds4_model')
    model_name = wanted if wanted not in (None, '') else own
    if model_name is not None:
        if model_name not in MODELS:
            var = 'ds4_model' if wanted not in (None, '') else 'ds4_profile_config.model.name'
            errors.append(_msg(var, model_name, 'unknown model', 'use one of: %s' % known('model')))
            return None, choice, errors, warnings
        section = _model_section(recipe_model, model_name, own == model_name)
        if pins.get(model_name):
            section['revision'] = pins[model_name]
        layer['model'] = section
        choice['model'] = model_name
        args = layer.get('serve_args')
        if isinstance(args, dict) and (own != model_name or 'served-model-name' not in args):
            args['served-model-name'] = MODELS[model_name]['served_model_name']
        if choice['measured_with'] and model_name not in choice['measured_with']:
            warnings.append('ds4_model = %s: recipe %s was measured with %s only; its figures do not carry over.'
                            % (model_name, choice['recipe'] or name, ', '.join(choice['measured_with'])))
    elif user is not None and isinstance(recipe_model, dict):
        # a user recipe without model.name: the catalogue entry with its repo id, if any, for the checks
        for key, spec in sorted(MODELS.items()):
            if spec['repo_id'] == recipe_model.get('repo_id'):
                choice['model'] = key
    image_value = layer.get('image')
    image: dict[str, Any] = image_value if isinstance(image_value, dict) else {}
    family = image.get('family')
    if family in IMAGE_FAMILIES:
        choice['family'] = family
        api = layer.get('api')
        if isinstance(api, dict) and 'port' not in api:
            api['port'] = IMAGE_FAMILIES[family]['api_port']
    return layer, choice, errors, warnings


def check_choice(merged: dict[str, Any], choice: dict[str, Any], errors: list[str]) -> None:
    """Mismatches between the merged serve_args and the chosen model / image family (each names both)."""
    args = merged.get('serve_args') or {}
    sources = merged.get('sources') or {}
    model_name: Any = choice.get('model')  # a catalogue name or None
    model = MODELS.get(model_name)
    family_name: Any = (merged.get('image') or {}).get('family')  # free-form YAML
    family = IMAGE_FAMILIES.get(family_name)
    spec = args.get('speculative-config')
    method = spec.get('method') if isinstance(spec, dict) else None
    if model and method is not None and method not in model['speculative_methods']:
        errors.append(_msg('%s[speculative-config].method' % sources.get('speculative-config', 'serve_args'), method,
                           'model %s (%s) has no %s draft: it takes %s (%s)'
                           % (choice['model'], model['repo_id'], method, ', '.join(model['speculative_methods']), model['source']),
                           'use a %s method, or a model with a %s draft (ds4_model)' % ('/'.join(model['speculative_methods']), method)))
    kv = args.get('kv-cache-dtype')
    var = '%s[kv-cache-dtype]' % sources.get('kv-cache-dtype', 'serve_args')
    if model and kv is not None and kv not in model['kv_cache_dtypes']:
        errors.append(_msg(var, kv, 'no cited source ran model %s (%s) with KV-cache dtype %s; it fits %s (%s)'
                           % (choice['model'], model['repo_id'], kv, ', '.join(model['kv_cache_dtypes']), model['source']),
                           'use one of those, or another model (ds4_model)'))
    if family and kv is not None and kv not in family['kv_cache_dtypes']:
        errors.append(_msg(var, kv, 'image family %s (image %s) has no KV-cache dtype %s; it has %s (%s)'
                           % (family_name, _fmt((merged.get('image') or {}).get('ref')), kv,
                              ', '.join(family['kv_cache_dtypes']), family['source']),
                           'use one of those, or an image family that has %s (%s)'
                           % (kv, ', '.join(sorted(n for n, f in IMAGE_FAMILIES.items() if kv in f['kv_cache_dtypes'])) or 'none')))
    load = args.get('load-format')
    if family and load in NEW_LOAD_FORMATS and load not in family['load_formats']:
        errors.append(_msg('%s[load-format]' % sources.get('load-format', 'serve_args'), load,
                           'no cited source shows load format %s in image family %s (it has %s)'
                           % (load, family_name, ', '.join(family['load_formats']) or 'none of %s' % ', '.join(NEW_LOAD_FORMATS)),
                           'drop load-format (vLLM\'s default loader), or use an image family that has it (%s)'
                           % ', '.join(sorted(n for n, f in IMAGE_FAMILIES.items() if load in f['load_formats']))))
