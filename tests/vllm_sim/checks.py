# -*- coding: utf-8 -*-
# Copyright (c) 2026 dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What vLLM and Docker check at start, in vLLM's wording (simulator: a STAND-IN for vLLM, test code only).

- env: `VLLM_*` names vLLM's envs.py does not know -> vLLM's warning (vllm/envs.py validate_environ),
  an error with --fail-on-environ-validation;
- the model argument resolves inside the container: a directory with config.json (else vLLM's
  "Invalid repository ID or local directory specified" ValueError), or with HF_HUB_OFFLINE a repo id
  found in the Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub:
  models--<org>--<name>/snapshots/<commit>, the commit from refs/<revision or main>; else
  huggingface_hub's LocalEntryNotFoundError);
- the weights: every file the index (model.safetensors.index.json weight_map) names, else every
  *.safetensors (vLLM's default loader);
- every directory vLLM writes at start is writable (VLLM_CACHE_ROOT, the torch.compile cache or
  --compilation-config cache_dir, TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, FlashInfer's JIT cache
  under FLASHINFER_WORKSPACE_BASE): created and probed for real, so a Docker `:ro` volume gives the
  kernel's `OSError: [Errno 30] Read-only file system: '<path>'` and a directory of another owner
  `PermissionError: [Errno 13] Permission denied: '<path>'`.

Outside a container (unit tests) two knobs stand in for the container's filesystem:
VLLM_SIM_ROOT (a directory used as the container's `/` for every path checked here) and
VLLM_SIM_RO_MOUNTS (colon-separated container paths mounted read-only, like `-v host:path:ro`).
"""


import errno
import glob
import json
import os
import re

COMMIT_RE = re.compile(r'^[0-9a-f]{40}$')
INDEX_NAME = 'model.safetensors.index.json'
TRUE_WORDS = ('1', 'ON', 'YES', 'TRUE')

INVALID_MODEL = ("ValueError: Invalid repository ID or local directory specified: '%s'.\n"
                 "Please verify the following requirements:\n"
                 "1. Provide a valid Hugging Face repository ID.\n"
                 "2. Specify a local directory that contains a recognized configuration file.\n"
                 "   - For Hugging Face models: ensure the presence of a 'config.json'.\n"
                 "   - For Mistral models: ensure the presence of a 'params.json'.")
NO_SNAPSHOT = ("huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder for the "
               "specified revision on the local disk and outgoing traffic has been disabled. To enable repo look-ups and "
               "downloads online, pass 'local_files_only=False' as input.")
NOT_IN_CACHE = ("huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and "
                "outgoing traffic has been disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' "
                "to False.")
NO_WEIGHTS = 'RuntimeError: Cannot find any model weights with `%s`'
NOT_INITIALIZED = 'ValueError: Following weights were not initialized from checkpoint: %s'
UNKNOWN_ENV = 'Unknown vLLM environment variable detected: %s'


class StartupError(Exception):
    """A start-up failure: `lines` end the traceback, `note` is the simulator's own explanation (or None)."""

    def __init__(self, lines, note=None):
        Exception.__init__(self, lines[-1])
        self.lines = lines
        self.note = note


def container_path(path):
    """Where a container path lies on this filesystem (VLLM_SIM_ROOT stands in for the container's /)."""
    root = os.environ.get('VLLM_SIM_ROOT', '')
    if root and os.path.isabs(path):
        return os.path.join(root, path.lstrip('/'))
    return path


def _shown(real):
    """A real path back as the container sees it (for messages)."""
    root = os.environ.get('VLLM_SIM_ROOT', '')
    if root and real and (real == root or real.startswith(root.rstrip('/') + '/')):
        return '/' + real[len(root.rstrip('/')):].lstrip('/')
    return real


def _home():
    return os.path.expanduser('~')


def _truthy(name):
    return os.environ.get(name, '').strip().upper() in TRUE_WORDS


# --------------------------------------------------------------------------- env

def unknown_env(known, environ=None):
    """VLLM_* names vLLM would flag (the simulator's own VLLM_SIM_* knobs excepted), sorted."""
    environ = os.environ if environ is None else environ
    return sorted(n for n in environ if n.startswith('VLLM_') and not n.startswith('VLLM_SIM_') and n not in known)


# --------------------------------------------------------------------------- model

def hub_cache():
    """huggingface_hub's cache directory: HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get('HF_HUB_CACHE'):
        return os.environ['HF_HUB_CACHE']
    home = os.environ.get('HF_HOME') or os.path.join(os.environ.get('XDG_CACHE_HOME') or os.path.join(_home(), '.cache'),
                                                     'huggingface')
    return os.path.join(home, 'hub')


def _looks_like_path(model):
    return model.startswith(('/', './', '../', '~')) or os.path.exists(container_path(model))


def resolve_model(model, revision=None):
    """-> the model directory (container path) vLLM would load, or raise StartupError."""
    if _looks_like_path(model):
        path = os.path.expanduser(model)
        if not os.path.isfile(os.path.join(container_path(path), 'config.json')):
            what = ('does not exist' if not os.path.exists(container_path(path))
                    else 'has no config.json' if os.path.isdir(container_path(path)) else 'is not a directory')
            raise StartupError([INVALID_MODEL % model], note='model path %s %s inside the container' % (path, what))
        return path
    if not _truthy('HF_HUB_OFFLINE'):
        # Online, vLLM would download it; the simulator has no network: accept the id as it is.
        return None
    repo = os.path.join(hub_cache(), 'models--' + model.replace('/', '--'))
    rev = revision or 'main'
    commit = rev if COMMIT_RE.match(rev) else None
    if commit is None:
        try:
            with open(os.path.join(container_path(repo), 'refs', rev)) as handle:
                commit = handle.read().strip()
        except (OSError, IOError):
            commit = None
    snapshot = os.path.join(repo, 'snapshots', commit) if commit else None
    if snapshot is None or not os.path.isdir(container_path(snapshot)):
        looked = snapshot or os.path.join(repo, 'refs', rev)
        raise StartupError([NO_SNAPSHOT], note='HF_HUB_OFFLINE=1 and repo id %s: no snapshot at %s' % (model, looked))
    if not os.path.isfile(os.path.join(container_path(snapshot), 'config.json')):
        raise StartupError([NOT_IN_CACHE, '', 'The above exception was the direct cause of the following exception:', '',
                            INVALID_MODEL % model], note='snapshot %s has no config.json' % snapshot)
    return snapshot


def weight_files(model_dir, model, load_format=None):
    """The safetensors files vLLM's default loader reads from model_dir (container paths), or raise StartupError."""
    # fastsafetensors and instanttensor (vLLM 0.33, field notes 2026-11) read the same *.safetensors shards, only faster
    if load_format not in (None, 'auto', 'safetensors', 'fastsafetensors', 'instanttensor'):
        return []
    real = container_path(model_dir)
    index = os.path.join(real, INDEX_NAME)
    if os.path.isfile(index):
        try:
            with open(index) as handle:
                weight_map = json.load(handle).get('weight_map') or {}
        except ValueError as exc:
            raise StartupError(['json.decoder.JSONDecodeError: %s' % exc], note='%s is not JSON' % INDEX_NAME)
        names = sorted(set(weight_map.values()))
        missing = [n for n in names if not os.path.isfile(os.path.join(real, n))]
        if missing:
            tensors = sorted(k for k, v in weight_map.items() if v in missing)
            shown = '{%s}' % ', '.join(repr(t) for t in tensors[:8]) + (' (and %d more)' % (len(tensors) - 8) if len(tensors) > 8 else '')
            raise StartupError([NOT_INITIALIZED % shown],
                               note='%s names %d file(s) missing from %s: %s' % (INDEX_NAME, len(missing), model_dir, ', '.join(missing)))
        if names:
            return [os.path.join(model_dir, n) for n in names]
    found = sorted(glob.glob(os.path.join(real, '*.safetensors')))
    if not found:
        raise StartupError([NO_WEIGHTS % model], note='no *.safetensors in %s' % model_dir)
    return [os.path.join(model_dir, os.path.basename(f)) for f in found]


# --------------------------------------------------------------------------- writable directories

def cache_dirs(compilation_config=None, enforce_eager=False):
    """[(what, container path)] of every directory vLLM writes at start."""
    root = os.path.expanduser(os.environ.get('VLLM_CACHE_ROOT') or os.path.join(
        os.environ.get('XDG_CACHE_HOME') or os.path.join(_home(), '.cache'), 'vllm'))
    out = [('VLLM_CACHE_ROOT', root)]
    compiled = not enforce_eager and not _truthy('VLLM_DISABLE_COMPILE_CACHE')
    cc = compilation_config if isinstance(compilation_config, dict) else {}
    if compiled:
        if cc.get('cache_dir'):
            out.append(('--compilation-config cache_dir', os.path.expanduser(str(cc['cache_dir']))))
        else:
            out.append(('torch.compile cache', os.path.join(root, 'torch_compile_cache')))
    out.append(('TRITON_CACHE_DIR', os.environ.get('TRITON_CACHE_DIR') or os.path.join(_home(), '.triton', 'cache')))
    if os.environ.get('TORCHINDUCTOR_CACHE_DIR'):
        out.append(('TORCHINDUCTOR_CACHE_DIR', os.environ['TORCHINDUCTOR_CACHE_DIR']))
    base = os.environ.get('FLASHINFER_WORKSPACE_BASE') or _home()
    out.append(('FlashInfer JIT cache (FLASHINFER_WORKSPACE_BASE)', os.path.join(base, '.cache', 'flashinfer')))
    return out


def _ro_mount(path):
    """The VLLM_SIM_RO_MOUNTS entry holding `path` (a container path), or None."""
    for mount in (m.rstrip('/') for m in os.environ.get('VLLM_SIM_RO_MOUNTS', '').split(':')):
        if mount and (path == mount or path.startswith(mount + '/')):
            return mount
    return None


def _first_missing(path):
    """The first component of `path` that does not exist (what os.makedirs creates first)."""
    parts = path.rstrip('/').split('/')
    for i in range(2, len(parts) + 1):
        candidate = '/'.join(parts[:i])
        if not os.path.exists(container_path(candidate)):
            return candidate
    return path


def _oserror_line(exc, path):
    name = 'PermissionError' if exc.errno in (errno.EACCES, errno.EPERM) else 'OSError'
    return "%s: [Errno %d] %s: '%s'" % (name, exc.errno, exc.strerror or os.strerror(exc.errno), path)


def check_writable(what, path):
    """os.makedirs(path, exist_ok=True) + a probe file, as vLLM's first write there; StartupError on failure."""
    mount = _ro_mount(path)
    if mount is not None:
        target = _first_missing(path) if not os.path.isdir(container_path(path)) else path
        raise StartupError([_oserror_line(OSError(errno.EROFS, os.strerror(errno.EROFS)), target)],
                           note='%s = %s lies on the read-only mount %s' % (what, path, mount))
    real = container_path(path)
    try:
        os.makedirs(real, exist_ok=True)
        probe = os.path.join(real, '.vllm-sim-write-probe-%d' % os.getpid())
        with open(probe, 'w') as handle:
            handle.write('probe\n')
        os.unlink(probe)
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.ENOSPC):
            raise
        shown = _shown(exc.filename) if exc.filename else path
        if shown and os.path.basename(shown).startswith('.vllm-sim-write-probe-'):
            shown = os.path.dirname(shown)
        raise StartupError([_oserror_line(exc, shown)], note='%s = %s is not writable' % (what, path))
