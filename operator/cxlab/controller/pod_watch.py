"""cxlab's own Pods, listed and watched by the operator itself rather than by kopf.

Each Pod event through kopf's machinery (its causes, diff base, progress storage, handler
invocations, a task per object) cost more than everything a pass does for that event, and a
trial Pod brings about six events: kopf was the largest part of the operator's CPU per
trial after the passes (py-spy, bench-scale). Here a thread per scope reads the watch stream,
turns each Pod into its PodView there, and hands it to the event loop, which keeps the index
and wakes the experiment (cxlab.controller.wakes).

A scope is the whole cluster (the operator serves every namespace) or one namespace (it
serves listed ones, with a Role in each): a namespace's watch starts when its first
experiment's loop asks for its Pods. A loop's first pass waits until its scope has been
listed once, as kopf's indexes did: a pass that saw no Pods would create them again.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from kubernetes.client.exceptions import ApiException

from cxlab.controller.done_watch import DoneWatches
from cxlab.controller.host_watch import HostWatch
from cxlab.controller.rest import Rest, pods_path
from cxlab.experiments.hosts import UNREACHABLE
from cxlab.experiments.pod_view import PodPhase, PodView, view_pod
from cxlab.experiments.pods import COMPONENT_HOST, COMPONENT_TRIAL, LABEL_EXPERIMENT

Key = tuple[str, str]  # (namespace, experiment)
# Called on the event loop for every Pod view set or gone: (experiment, before, after), None
# for a Pod not there before or gone now; changed or not: the one place that decides whether
# a Pod changed as an experiment sees it is Wakes.pod_changed.
OnChange = Callable[[Key, PodView | None, PodView | None], None]
# What an event says: a Pod as it is now, by its experiment, or the key of a Pod deleted.
Found = tuple[Key, PodView] | str
CLUSTER = ""  # the scope of every namespace (pods_path's "")
# The apiserver ends a watch after this long (it spreads the reconnects); the client gives
# up on a silent connection a little later. Bookmarks keep the resume point fresh between.
WATCH_SECONDS = 300
READ_TIMEOUT_SECONDS = WATCH_SECONDS + 30
LIST_PAGE = 500
MAX_BACKOFF_SECONDS = 30.0

log = logging.getLogger(__name__)


class Gone(Exception):
    """The resume point is too old (410): list again."""


class PodIndex:
    def __init__(
        self, rest: Rest, on_change: OnChange, clusterwide: bool, host_port: int | None = None,
        done_port: int | None = None,
    ) -> None:  # fmt: skip
        """`host_port`: where trial hosts (isolation: process) answer; their trials are in
        the index too, as views of Pods (cxlab.controller.host_watch). `done_port`: where
        runners answer GET /done?wait= (their metrics port): a running trial Pod shows Ready
        as its tasks end (cxlab.controller.done_watch); None: at its readiness probe."""
        self._rest = rest
        self._on_change = on_change
        self._clusterwide = clusterwide
        self._host_port = host_port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pods: dict[Key, dict[str, PodView]] = {}
        self._scopes: dict[str, _Scope] = {}
        self._hosts: dict[str, _Host] = {}  # "namespace/name" of a trial host → its watch
        self._done = None if done_port is None else DoneWatches(done_port, self._from_done)
        self._ended: set[str] = set()  # "namespace/name" of trial Pods whose tasks ended
        self._stop = threading.Event()

    @property
    def done_watches(self) -> DoneWatches | None:
        """Where a trial Pod about to be created reserves the watch of its tasks' end (None:
        no final read, so none is watched)."""
        return self._done

    def pods(self, key: Key) -> list[PodView]:
        """The experiment's Pods, as last seen (on the event loop)."""
        return list(self._pods.get(key, {}).values())

    def start(self) -> None:
        """On the event loop, before any loop asks: serving every namespace, the one watch
        starts listing now, beside kopf's own lists."""
        self._loop = asyncio.get_running_loop()
        if self._clusterwide:
            self._scope(CLUSTER)

    async def ready(self, namespace: str) -> None:
        """Once the Pods of `namespace` have been listed: its watch starts if none covers it."""
        self._loop = asyncio.get_running_loop()
        await self._scope(CLUSTER if self._clusterwide else namespace).listed.wait()

    def _scope(self, name: str) -> _Scope:
        scope = self._scopes.get(name)
        if scope is None:
            scope = self._scopes[name] = _Scope(name)
            thread = threading.Thread(
                target=self._watch, args=(scope,), name=f"pods-{name or 'all'}", daemon=True
            )
            thread.start()
        return scope

    def stop(self) -> None:
        """Ends every watch now (a read in progress is cut)."""
        self._stop.set()
        for scope in self._scopes.values():
            answer = scope.answer
            if answer is not None:
                answer.shutdown()
        for host in self._hosts.values():
            host.watch.stop()
        if self._done is not None:
            self._done.stop()

    # ---- the watch thread --------------------------------------------------------------

    def _watch(self, scope: _Scope) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                if scope.version is None:
                    views, scope.version = self._list(scope.name)
                    self._deliver(self._listed, scope, views)
                for found in self._events(scope):
                    self._deliver(self._changed, scope, found)
                    failures = 0
            except Gone:
                scope.version = None  # list again: what went meanwhile is found then
            except Exception as error:  # the apiserver away, a cut connection: resume
                if self._stop.is_set():
                    return
                failures += 1
                delay = min(2.0 ** (failures - 1), MAX_BACKOFF_SECONDS)
                log.warning("watching Pods (%s): %s; again in %.0f s", scope, error, delay)
                self._stop.wait(delay)

    def _list(self, namespace: str) -> tuple[dict[str, tuple[Key, PodView]], str]:
        views: dict[str, tuple[Key, PodView]] = {}
        more: str | None = None
        while True:
            query = {"labelSelector": LABEL_EXPERIMENT, "limit": LIST_PAGE, "continue": more}
            page = self._rest.request("GET", pods_path(namespace), query=query)
            for pod in page.get("items") or []:
                views[_pod_key(pod)] = (_experiment(pod), view_pod(pod))
            more = (page.get("metadata") or {}).get("continue")
            if not more:
                return views, page["metadata"]["resourceVersion"]

    def _events(self, scope: _Scope) -> Iterator[Found]:
        """What each event found, from the scope's version on; each moves the version on
        (a bookmark only that), so the next watch resumes there."""
        query = {
            "labelSelector": LABEL_EXPERIMENT, "watch": "true", "resourceVersion": scope.version,
            "allowWatchBookmarks": "true", "timeoutSeconds": WATCH_SECONDS,
        }  # fmt: skip
        try:
            for event in self._rest.stream(
                pods_path(scope.name), query=query, timeout=READ_TIMEOUT_SECONDS,
                opened=lambda answer: setattr(scope, "answer", answer),
            ):  # fmt: skip
                kind, pod = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if pod.get("code") == 410:
                        raise Gone(pod.get("message"))
                    raise ApiException(status=pod.get("code"), reason=pod.get("message"))
                scope.version = pod["metadata"]["resourceVersion"]
                if kind == "BOOKMARK":
                    continue
                yield _pod_key(pod) if kind == "DELETED" else (_experiment(pod), view_pod(pod))
        except ApiException as error:
            if error.status == 410:
                raise Gone(str(error.reason)) from error
            raise
        finally:
            scope.answer = None

    def _deliver(self, apply: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None or loop.is_closed() or self._stop.is_set():
            return
        loop.call_soon_threadsafe(apply, *args)

    # ---- on the event loop -------------------------------------------------------------

    def _listed(self, scope: _Scope, views: dict[str, tuple[Key, PodView]]) -> None:
        """A full list: what it lacks went while the watch was away."""
        for pod_key in [k for k in scope.where if k not in views]:
            self._changed(scope, pod_key)
        for found in views.values():
            self._changed(scope, found)
        scope.listed.set()

    def _changed(self, scope: _Scope, found: Found) -> None:
        if isinstance(found, str):  # deleted
            key = scope.where.pop(found, None)
            if key is None:
                return
            self._host_gone(found)
            self._trial_gone(found)
            name = found.partition("/")[2]
            mine = self._pods.get(key, {})
            before = mine.pop(name, None)
            if not mine:
                self._pods.pop(key, None)
            self._on_change(key, before, None)
            return
        key, view = found
        scope.where[f"{key[0]}/{view.name}"] = key
        if view.component == COMPONENT_HOST and self._host_port is not None:
            view = self._host_seen(key, view)
        elif view.component == COMPONENT_TRIAL and self._done is not None:
            view = self._trial_seen(f"{key[0]}/{view.name}", view)
        self._set(key, view)

    def _set(self, key: Key, view: PodView) -> None:
        mine = self._pods.setdefault(key, {})
        before = mine.get(view.name)
        mine[view.name] = view
        self._on_change(key, before, view)  # whether that changed anything is its to say

    def _unset(self, key: Key, name: str) -> None:
        mine = self._pods.get(key, {})
        before = mine.pop(name, None)
        if not mine:
            self._pods.pop(key, None)
        if before is not None:
            self._on_change(key, before, None)

    # ---- the end of a trial Pod's tasks (done_watch), on the event loop ---------------

    def _trial_seen(self, pod_key: str, view: PodView) -> PodView:
        """A trial Pod as the apiserver has it: a running one is watched until its tasks
        end; from then on it shows Ready, whatever the kubelet's probe has said so far."""
        assert self._done is not None
        running = view.phase == PodPhase.RUNNING and not view.deleting
        if pod_key in self._ended:
            return replace(view, ready=True) if running else view
        if running and view.ip and not view.ready:
            self._done.watch(pod_key, view.ip, unprobed=view.unprobed)
        elif view.ready or not view.live:  # (a Pending one keeps the watch reserved for it)
            self._done.forget(pod_key)
        return view

    def _from_done(self, pod_key: str) -> None:
        """From a done watch's thread: the Pod's tasks ended."""
        self._deliver(self._tasks_ended, pod_key)

    def _tasks_ended(self, pod_key: str) -> None:
        key = next((s.where[pod_key] for s in self._scopes.values() if pod_key in s.where), None)
        view = None if key is None else self._pods.get(key, {}).get(pod_key.partition("/")[2])
        if key is None or view is None:
            return  # gone meanwhile
        self._ended.add(pod_key)
        assert self._done is not None
        self._done.forget(pod_key)  # known: its watch (an unprobed Pod's too) is free
        self._set(key, self._trial_seen(pod_key, view))

    def _trial_gone(self, pod_key: str) -> None:
        self._ended.discard(pod_key)
        if self._done is not None:
            self._done.forget(pod_key)

    # ---- trial hosts (isolation: process), on the event loop ---------------------------

    def _host_seen(self, key: Key, view: PodView) -> PodView:
        """A trial host's Pod as the apiserver has it: its watch starts once it has an
        address (not at its readiness probe's next period: its first trial is posted as soon
        as it answers) and stops once it is not live; the view says what the watch knows
        (its trials listed, or the host lost for not answering)."""
        pod_key = f"{key[0]}/{view.name}"
        host = self._hosts.get(pod_key)
        if host is None and view.live and view.ip:
            assert self._host_port is not None
            watch = HostWatch(view, self._host_port, functools.partial(self._from_host, pod_key))
            host = self._hosts[pod_key] = _Host(key, watch)
            watch.start()
        elif host is not None and not view.live:
            self._host_gone(pod_key)
            return view
        if host is None:
            return view
        if view.ready:  # it serves, the kubelet says: from now on, silence means lost
            host.watch.ready()
        return host.shown(view)

    def _from_host(self, pod_key: str, trials: dict[str, PodView] | None) -> None:
        """From a host's watch thread: hand its trials to the event loop."""
        self._deliver(self._hosted, pod_key, trials)

    def _hosted(self, pod_key: str, trials: dict[str, PodView] | None) -> None:
        """What a host runs now (None: it stopped answering: lost, with its trials)."""
        host = self._hosts.get(pod_key)
        if host is None:
            return  # its watch was stopped meanwhile
        if trials is None:
            host.unreachable = True
            trials = {}
        for name in host.trials - trials.keys():
            self._unset(host.key, name)
        for trial in trials.values():
            self._set(host.key, trial)
        host.trials = set(trials)
        host.listed = True
        name = pod_key.partition("/")[2]
        view = self._pods.get(host.key, {}).get(name)
        if view is not None:
            self._set(host.key, host.shown(view))

    def _host_gone(self, pod_key: str) -> None:
        """A host's Pod ended or went: its watch stops, and its trials go with it."""
        host = self._hosts.pop(pod_key, None)
        if host is None:
            return
        host.watch.stop()
        for name in host.trials:
            self._unset(host.key, name)


class _Host:
    def __init__(self, key: Key, watch: HostWatch) -> None:
        self.key = key
        self.watch = watch
        self.trials: set[str] = set()  # the names of its trials in the index
        self.listed = False  # it has answered once
        self.unreachable = False

    def shown(self, view: PodView) -> PodView:
        """The host's Pod as the passes see it: what its watch knows added to what the
        apiserver says (its trials read; lost for not answering, as a Pod of a lost node)."""
        if self.unreachable:
            return replace(view, phase=PodPhase.FAILED, reason=UNREACHABLE, trials_listed=True)
        return replace(view, trials_listed=self.listed)


class _Scope:
    def __init__(self, name: str) -> None:
        self.name = name
        self.listed = asyncio.Event()
        self.where: dict[str, Key] = {}  # "namespace/pod" → its experiment
        self.answer: Any = None  # the watch's open response, to cut it on stop
        self.version: str | None = None  # where the next watch resumes (None: list first)

    def __str__(self) -> str:
        return self.name or "every namespace"


def _pod_key(pod: dict[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def _experiment(pod: dict[str, Any]) -> Key:
    metadata = pod.get("metadata") or {}
    return metadata.get("namespace", ""), (metadata.get("labels") or {}).get(LABEL_EXPERIMENT, "")
