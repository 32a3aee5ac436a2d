# -*- coding: utf-8 -*-
# Copyright (c) 2026, dgxspark.ds4 contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What dgxspark.ds4.container_image decides about its images (pure logic, no Ansible imports).

The head keeps one record (``/var/lib/dgxspark-ds4/image-pins.json``)::

    {"version": 1,
     "images": {"<tag ref>": {"id": "sha256:...", "digest": "<repo>@sha256:..." | null, "source": "pull",
                              "history": [{"from_id", "from_digest", "to_id", "to_digest"}, ...]}},
     "deepgemm": {"<git repo url>": {"commit": "<40 hex>", "history": [{"from", "to"}, ...]}}}

* Digest pinning: the first run resolves the tag to its image ID and registry digest (RepoDigests) and
  records them; later runs use the recorded image and never move to what the tag points to now. Only
  ``container_image_update=true`` obtains the tag again, moves the record and keeps old -> new in the history.
* DeepGEMM: a pinned commit wins; else the commit resolved at the first build (seed 000 clones
  ``--recursive`` at the default branch, no commit given) is recorded and reused; update resolves again.
* Pruning: derived images of this collection (its label and the tag it gave them) that neither run nor are the
  rollback target.
"""


import re
from typing import Any

RECORD_VERSION = 1
HISTORY_KEEP = 10
DERIVED_LABEL = 'org.dgxspark.ds4.derived.inputs-hash'
_HEX40 = re.compile(r'^[0-9a-f]{40}$')
_COMMIT_LINE = re.compile(r'^([0-9a-f]{40})\s+(\S+)\s*$')
_IMAGE_ID = re.compile(r'sha256:[0-9a-f]{64}')


def split_ref(ref: str | None) -> tuple[str, str | None, str | None]:
    """``(repository, tag, digest)`` of an image reference (tag None when absent, digest None when absent)."""
    ref = (ref or '').strip()
    digest: str | None = None
    if '@' in ref:
        ref, digest = ref.rsplit('@', 1)
    tag: str | None = None
    last = ref.rsplit('/', 1)[-1]
    if ':' in last:
        ref, tag = ref.rsplit(':', 1)
    return ref, tag, digest


def _canonical_repo(repo: str) -> str:
    """docker.io/library/x, docker.io/x and x are the same repository."""
    for prefix in ('docker.io/library/', 'index.docker.io/library/', 'docker.io/', 'index.docker.io/'):
        if repo.startswith(prefix):
            repo = repo[len(prefix):]
            break
    if repo.startswith('library/'):
        repo = repo[len('library/'):]
    return repo


def repo_digest(ref: str, repo_digests: list[str] | None) -> str | None:
    """The ``repo@sha256:...`` of ``ref``'s repository among an image's RepoDigests (None when there is none:
    a loaded or locally built image has no registry digest)."""
    repo = _canonical_repo(split_ref(ref)[0])
    for item in repo_digests or []:
        name, dummy, digest = item.partition('@')
        if digest and _canonical_repo(name) == repo:
            return item
    return None


def empty_record() -> dict[str, Any]:
    return {'version': RECORD_VERSION, 'images': {}, 'deepgemm': {}}


def load_record(data: Any) -> dict[str, Any]:
    """Normalise a parsed record (None, {} or an older/garbled file -> an empty record)."""
    rec = empty_record()
    if isinstance(data, dict):
        for key in ('images', 'deepgemm'):
            if isinstance(data.get(key), dict):
                # one level: every function here replaces an entry (rec[key][ref] = new), none changes one in place; a
                # deep copy of the variables Ansible hands a filter renders each value again (a recipe switch's
                # profile: 0.4 CPU-s a run)
                rec[key] = dict(data[key])
    return rec


def plan(record: Any, ref: str, update: bool = False, source: str = 'pull', recorded_present: bool = False) -> dict[str, Any]:
    """What to obtain before inspecting the tag.

    Returns ``{'action', 'pinned', 'pull_ref', 'reason'}``, action one of:
      ``obtain``      no record for the ref yet: obtain as before (nothing happens while the tag is present);
      ``refresh``     ``update``: obtain the tag again (pull / load / build forced);
      ``keep``        the recorded image is on the node: obtain nothing;
      ``pull-digest`` the recorded image is gone and has a registry digest: pull exactly that digest;
      ``reobtain``    the recorded image is gone, no digest (load / build): obtain again (forced), then
                      it must be the recorded image.
    """
    rec = load_record(record)
    entry = rec['images'].get(ref)
    out: dict[str, Any] = {'pinned': entry, 'pull_ref': None}
    if update:
        out.update(action='refresh', reason='container_image_update=true: %s is obtained again (source %s) and the record '
                                            'moves to what it points to' % (ref, source))
    elif not entry:
        out.update(action='obtain', reason='%s has no record yet: its image is recorded at this first %s' % (ref, source))
    elif recorded_present:
        out.update(action='keep', reason='%s is pinned to %s (recorded); nothing is obtained' % (ref, entry['id']))
    elif entry.get('digest') and source == 'pull':
        out.update(action='pull-digest', pull_ref=entry['digest'],
                   reason='the recorded image %s of %s is not on the node: pulling exactly %s' % (entry['id'], ref, entry['digest']))
    else:
        out.update(action='reobtain', reason='the recorded image %s of %s is not on the node and has no registry digest: '
                                             'obtained again (source %s), it must be the recorded image' % (entry['id'], ref, source))
    return out


def settle(record: Any, ref: str, update: bool = False, source: str = 'pull', tag_image: dict[str, Any] | None = None,
           recorded_image: dict[str, Any] | None = None) -> dict[str, Any]:
    """The image this run uses, after obtaining.

    ``tag_image``: docker image info (``Id``, ``RepoDigests``) of what ``ref`` points to now, or None.
    ``recorded_image``: the image info of the recorded ID (None when absent or no record).
    Returns ``{'id', 'digest', 'inspect', 'record', 'moved', 'drift', 'tag_id', 'messages', 'error'}``;
    ``record`` is the whole new record (write it when it differs), ``inspect`` the name to inspect the
    base image by (the pinned image ID).
    """
    rec = load_record(record)
    entry = rec['images'].get(ref)
    tag_id = (tag_image or {}).get('Id')
    out: dict[str, Any] = {'id': None, 'digest': None, 'inspect': None, 'record': rec, 'moved': False, 'drift': False,
                           'tag_id': tag_id, 'messages': [], 'error': None}
    if entry and not update:
        out.update(id=entry['id'], digest=entry.get('digest'), inspect=entry['id'])
        if not recorded_image or recorded_image.get('Id') != entry['id']:
            found = ('%s now gives %s' % (ref, tag_id)) if tag_id else ('%s is not on the node' % ref)
            out['error'] = ('%s is pinned to %s (%s, recorded on the head) but that image is not on the node and the '
                            'source did not give it back: %s. Fix: -e container_image_update=true to record and use what '
                            '%s gives now, or bring the pinned image back.'
                            % (ref, entry['id'], entry.get('digest') or 'no digest', found, ref))
            return out
        if tag_id and tag_id != entry['id']:
            out['drift'] = True
            out['messages'].append('%s now points to %s; the pinned %s stays in use (recorded). '
                                   '-e container_image_update=true moves to it.' % (ref, tag_id, entry['id']))
        else:
            out['messages'].append('%s pinned to %s%s' % (ref, entry['id'], (' (%s)' % entry['digest']) if entry.get('digest') else ''))
        return out
    if not tag_id and source == 'local':
        out['error'] = ('%s is not on the head: container_image_source=local means it is built there outside the collection '
                        '(never pulled). Fix: build it on the head first, or set container_image_source to pull, load or build.' % ref)
        return out
    if not tag_id:
        out['error'] = '%s is not on the node after container_image_source=%s. Fix: make the source provide exactly that ref.' % (ref, source)
        return out
    digest: str | None
    if split_ref(ref)[2]:
        digest = ref
    else:
        digest = repo_digest(ref, (tag_image or {}).get('RepoDigests'))
    new: dict[str, Any] = {'id': tag_id, 'digest': digest, 'source': source,
                           'history': list((entry or {}).get('history') or [])}
    out.update(id=tag_id, digest=digest, inspect=tag_id)
    if entry and entry['id'] != tag_id:
        new['history'] = (new['history'] + [{'from_id': entry['id'], 'from_digest': entry.get('digest'),
                                             'to_id': tag_id, 'to_digest': digest}])[-HISTORY_KEEP:]
        out['moved'] = True
        out['messages'].append('container_image_update: %s moved from %s (%s) to %s (%s); old and new recorded'
                               % (ref, entry['id'], entry.get('digest') or 'no digest', tag_id, digest or 'no digest'))
    elif entry:
        out['messages'].append('container_image_update: %s still gives the pinned %s; nothing moves' % (ref, tag_id))
    else:
        out['messages'].append('%s recorded as %s%s (first %s); later runs use this image until '
                               '-e container_image_update=true' % (ref, tag_id, (' (%s)' % digest) if digest else '', source))
    rec['images'][ref] = new
    return out


def deepgemm_choice(record: Any, repo: str, pinned: str = '', update: bool = False) -> dict[str, Any]:
    """Which DeepGEMM commit the derived image installs.

    Returns ``{'commit', 'source', 'resolve'}``: source ``pinned`` (container_image_deepgemm_ref), ``recorded``
    (resolved at an earlier build) or ``resolve`` (no commit yet, or update: resolve the default branch now).
    """
    if pinned:
        return {'commit': pinned, 'source': 'pinned', 'resolve': False}
    entry = load_record(record)['deepgemm'].get(repo) or {}
    if entry.get('commit') and not update:
        return {'commit': entry['commit'], 'source': 'recorded', 'resolve': False}
    return {'commit': None, 'source': 'resolve', 'resolve': True}


def parse_ls_remote(stdout: str | None) -> str | None:
    """The commit of ``HEAD`` in ``git ls-remote <repo> HEAD`` output (None when there is none)."""
    for line in (stdout or '').splitlines():
        match = _COMMIT_LINE.match(line.strip())
        if match and match.group(2) == 'HEAD':
            return match.group(1)
    return None


def deepgemm_settle(record: Any, repo: str, choice: dict[str, Any], resolved_stdout: str | None = None) -> dict[str, Any]:
    """Record a resolved commit. Returns ``{'commit', 'source', 'record', 'moved', 'messages', 'error'}``."""
    rec = load_record(record)
    out: dict[str, Any] = {'commit': choice.get('commit'), 'source': choice.get('source'), 'record': rec, 'moved': False,
                           'messages': [], 'error': None}
    if not choice.get('resolve'):
        return out
    commit = parse_ls_remote(resolved_stdout)
    if not commit:
        out['error'] = ('cannot resolve the default branch of %s (container_image_deepgemm_resolve printed %r). Fix: set '
                        'container_image_deepgemm_ref to a 40-hex DeepGEMM commit, or give the image network and git.'
                        % (repo, (resolved_stdout or '')[:200]))
        return out
    entry = rec['deepgemm'].get(repo) or {}
    history = list(entry.get('history') or [])
    if entry.get('commit') and entry['commit'] != commit:
        history = (history + [{'from': entry['commit'], 'to': commit}])[-HISTORY_KEEP:]
        out['moved'] = True
        out['messages'].append('container_image_update: DeepGEMM %s moved from %s to %s; old and new recorded'
                               % (repo, entry['commit'], commit))
    else:
        out['messages'].append('DeepGEMM %s resolved to %s (default branch) and recorded; later builds use it until '
                               '-e container_image_update=true or container_image_deepgemm_ref' % (repo, commit))
    rec['deepgemm'][repo] = {'commit': commit, 'history': history}
    out.update(commit=commit, source='resolved')
    return out


def valid_commit(value: str | None) -> bool:
    return bool(_HEX40.match(value or ''))


def referenced_ids(texts: list[str | None] | None) -> set[str]:
    """Every image ID (``sha256:<64 hex>``) written in the given texts (unit files, kept sets)."""
    ids: set[str] = set()
    for text in texts or []:
        ids.update(_IMAGE_ID.findall(text or ''))
    return ids


def prune_plan(images: list[dict[str, Any]] | None, keep_ids: list[str | None] | None, repository: str,
               label: str = DERIVED_LABEL) -> list[dict[str, Any]]:
    """Derived images of this collection to remove.

    ``images``: docker image info dicts (``Id``, ``RepoTags``, ``Config.Labels``). A candidate carries ``label`` (the
    inputs hash H) AND the tag the role gave it, ``<repository>:<H[:16]>``: an image built FROM a derived one
    inherits the label but not that tag, so a user's image is never a candidate, nor an untagged one.
    ``keep_ids``: IDs to keep (the effective image, the running one and the rollback target).
    Returns ``[{'id', 'tags'}]`` sorted by ID.
    """
    keep = set(i for i in keep_ids or [] if i)
    out: dict[str, dict[str, Any]] = {}
    for image in images or []:
        labels = ((image.get('Config') or {}).get('Labels')) or {}
        inputs_hash = labels.get(label) or ''
        tags = sorted(image.get('RepoTags') or [])
        if len(inputs_hash) < 16 or '%s:%s' % (repository, inputs_hash[:16]) not in tags:
            continue
        image_id = image.get('Id')
        if not image_id or image_id in keep:
            continue
        out[image_id] = {'id': image_id, 'tags': tags}
    return [out[k] for k in sorted(out)]
