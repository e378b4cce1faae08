#!/usr/bin/env bash
# Builds the local images without Docker and imports them into the cluster's containerd:
#   cxlab.dev/pause:dev   static Go pause binary (hack/images/pause) in a scratch image
#   cxlab.dev/runner:dev  Debian bookworm minbase + python3, the Python runner with its pinned
#                         packages, cxlab-runner-go and cxlab-delay; runs as uid 65532 and
#                         needs no writable root filesystem
#   cxlab.dev/operator:dev the same base, the operator (`python3 -m cxlab.cli operator`) with its
#                         pinned packages, under /app as in the repository; uid 65532, read-only
#   cxlab.dev/httpbin:dev the same base and httpbin served by gunicorn, pinned in pyproject.toml
#                         ([tool.cxlab.services] httpbin): a service under test that nobody in
#                         this project wrote (spec.service, docs/service.md); uid 65532, read-only
#                         root filesystem; entrypoint python3 -m gunicorn, default arguments
#                         --bind 0.0.0.0:8080 httpbin:app (a variant's args replace them)
# The Python packages of each come from hack/image-requirements.py (pyproject.toml), as in
# operator/Containerfile and workloads/Containerfile.
# Each image is rebuilt only when the hash of its inputs changes (build/images/<name>/.inputs),
# and imported only when containerd does not hold that build (image label cxlab.dev/inputs).
#
#   hack/images.sh            build, then import if the cluster's containerd runs
#   hack/images.sh --build    build only
#   hack/images.sh --import   build if needed, import; fails if containerd does not run
set -euo pipefail
source "$(dirname "$0")/lib.sh"

mode=${1:-auto}
# The image's Python, 3.11: PYTHON, else the project's virtualenv, else the host's. The packages
# layers are installed with the virtualenv's uv (`make images` and `make cluster-up` make the
# virtualenv first).
PYTHON=${PYTHON:-$ROOT/.venv/bin/python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=$(command -v python3.11) || die "no Python 3.11 (set PYTHON=...)"
UV=$ROOT/.venv/bin/uv
[[ -x $UV ]] || die "no $UV: make the virtualenv first (make deps)"
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# tar of a directory as one image layer: root-owned, numeric ids, stable order
make_layer() { # dir out.tar [tar options]
  local dir=$1 out=$2; shift 2
  tar --numeric-owner --sort=name --xattrs -C "$dir" "$@" -cf "$out.tmp" . && mv "$out.tmp" "$out"
}

build_pause() {
  local dir="$IMAGES/pause" src="$ROOT/hack/images/pause" hash
  hash=$(hash_inputs "$src" "$ROOT/hack/images/docker-archive.py" "$ROOT/hack/images.sh" -- "$PAUSE_IMAGE" "$(go version)")
  if [[ -f $dir/image.tar && $(cat "$dir/.inputs" 2>/dev/null) == "$hash" ]]; then return; fi
  log "building image $PAUSE_IMAGE"
  rm -rf "$dir" && mkdir -p "$dir/rootfs"
  go_build_in "$src" -ldflags '-s -w' -o "$dir/rootfs/pause" .
  make_layer "$dir/rootfs" "$dir/layer.tar" --owner=0 --group=0
  "$PYTHON" "$ROOT/hack/images/docker-archive.py" -o "$dir/image.tar" --tag "$PAUSE_IMAGE" \
    --layer "$dir/layer.tar" --user 65535:65535 --entrypoint /pause
  rm -rf "$dir/rootfs" "$dir/layer.tar"
  echo "$hash" > "$dir/.inputs"
}

# Debian bookworm minbase with python3 (python3-minimal lacks urllib.request and http),
# made with debootstrap once per machine (the cache, lib.sh): about a minute and 125 MB.
build_base() {
  from_cache base-bookworm "$(hash_inputs -- "bookworm minbase python3 $DEBIAN_MIRROR v1")" \
    "$IMAGES/base-bookworm" debootstrap_base
}

debootstrap_base() { # out
  local dir=$1
  need_pkgs debootstrap:debootstrap
  log "debootstrap bookworm (minbase + python3) into the cache, once per machine"
  trap 'umount_under "$dir"' EXIT
  debootstrap --variant=minbase --include=python3 bookworm "$dir/rootfs" "$DEBIAN_MIRROR" \
    > "$dir/debootstrap.log" 2>&1 || { tail -20 "$dir/debootstrap.log" >&2; die "debootstrap failed (log: $dir/debootstrap.log)"; }
  umount_under "$dir"
  trap - EXIT
  # caches and documentation are not needed in a runner image
  (cd "$dir/rootfs" && rm -rf var/cache/apt/* var/lib/apt/lists/* var/log/* \
    usr/share/doc/* usr/share/man/* usr/share/info/* usr/share/locale/* dev/*)
  make_layer "$dir/rootfs" "$dir/layer.tar"
  rm -rf "$dir/rootfs"
}

umount_under() { # unmount what debootstrap left mounted (proc, sys) below a folder
  local m
  for m in $(findmnt -rn -o TARGET | grep "^$1/" | sort -r); do umount -l "$m" || true; done
}

# The pinned requirements of an image (runner, operator), one per line, from pyproject.toml.
read_pins() { "$PYTHON" "$ROOT/hack/image-requirements.py" "$1" "$ROOT/pyproject.toml"; }

# /etc/passwd and /etc/group of the base plus the non-root user the Pods run as (uid 65532,
# as distroless "nonroot")
add_nonroot_user() { # rootfs
  tar -xf "$IMAGES/base-bookworm/layer.tar" -C "$1" ./etc/passwd ./etc/group
  echo 'nonroot:x:65532:65532:nonroot:/tmp:/usr/sbin/nologin' >> "$1/etc/passwd"
  echo 'nonroot:x:65532:' >> "$1/etc/group"
}

SITE=usr/local/lib/python3.11/dist-packages   # the image's site-packages, from its root

# An image's pinned packages as one layer (site-packages, compiled), made once per machine and
# set of pins (the cache, lib.sh): only the code of the checkout goes into the layer above it.
# packages_layer image pins...
packages_layer() {
  local image=$1; shift
  ((${#@})) || die "could not read the $image image's pins from pyproject.toml"
  from_cache "packages-$image" "$(hash_inputs -- "packages v2 uv" "$("$PYTHON" -VV)" "$*")" \
    "$IMAGES/packages-$image" pip_layer "$@"
}

pip_layer() { # out requirements...
  local out=$1 site=$1/root/$SITE; shift
  log "uv pip install --target (into the cache, once per machine): $*"
  mkdir -p "$site" && chmod -R 0755 "$out/root"
  # uv (the project's, make deps) installs the same wheels as pip in a twentieth of its CPU;
  # --no-config: the host's uv configuration is not the image's; copies, not links into its cache
  "$UV" pip install --quiet --no-config --python "$PYTHON" --only-binary :all: --link-mode copy \
    --target "$site" "$@"
  # console scripts with the host's interpreter in their #! line; uv's lock of the target
  rm -rf "${site:?}/bin" "$site/.lock"
  "$PYTHON" -m compileall -q "$site"
  make_layer "$out/root" "$out/layer.tar" --owner=0 --group=0
  rm -rf "$out/root"
}

need_python311() {
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' ||
    die "$PYTHON is not Python 3.11, the image's Python (set PYTHON=...)"
}

# Both Python images end alike: the non-root user, the app layer over the base and the packages
# layer, the archive (HOME=/tmp and no .pyc writes: the root filesystem is read-only in Pods).
finish_python_image() { # dir app tag hash packages-image [docker-archive.py options]
  local dir=$1 app=$2 tag=$3 hash=$4 packages=$5; shift 5
  add_nonroot_user "$app"
  make_layer "$app" "$dir/app.tar" --owner=0 --group=0
  "$PYTHON" "$ROOT/hack/images/docker-archive.py" -o "$dir/image.tar" --tag "$tag" \
    --layer "$IMAGES/base-bookworm/layer.tar" --layer "$IMAGES/packages-$packages/layer.tar" \
    --layer "$dir/app.tar" --user 65532:65532 --workdir /tmp \
    --env PATH=/usr/local/bin:/usr/bin:/bin --env HOME=/tmp --env PYTHONDONTWRITEBYTECODE=1 \
    --env PYTHONUNBUFFERED=1 "$@"
  rm -rf "$app" "$dir/app.tar"
  echo "$hash" > "$dir/.inputs"
  log "built $tag: $(du -h "$dir/image.tar" | cut -f1)"
}

build_runner() {
  local dir="$IMAGES/runner" hash app site pins
  build_base
  need_python311
  mapfile -t pins < <(read_pins runner)
  packages_layer runner "${pins[@]}"
  hash=$(hash_inputs "$IMAGES/base-bookworm/.inputs" "$IMAGES/packages-runner/.inputs" \
    "$ROOT/hack/image-requirements.py" \
    "$ROOT/workloads/python/cxlab_runner" "$ROOT/workloads/python/cxlab_contract" \
    "$ROOT/workloads/go.mod" "$ROOT/workloads/go.sum" \
    "$ROOT/workloads/cmd" "$ROOT/workloads/internal" "$ROOT/hack/images/docker-archive.py" "$ROOT/hack/images.sh" \
    -- "$RUNNER_IMAGE" "$(go version)" "$("$PYTHON" -VV)" "${pins[*]}")
  if [[ -f $dir/image.tar && $(cat "$dir/.inputs" 2>/dev/null) == "$hash" ]]; then return; fi
  log "building image $RUNNER_IMAGE"
  rm -rf "$dir" && mkdir -p "$dir"
  app="$dir/app"
  site="$app/$SITE"
  mkdir -p "$site" "$app/usr/local/bin" "$app/etc"
  chmod -R 0755 "$app"

  # the Go runner and the delay target, static
  go_build_in "$ROOT/workloads" -ldflags '-s -w' -o "$app/usr/local/bin/" \
    ./cmd/cxlab-runner-go ./cmd/cxlab-delay

  # the runner and the contract it reads (models, buckets, the Result bound)
  cp -r --preserve=timestamps "$ROOT/workloads/python/cxlab_runner" "$ROOT/workloads/python/cxlab_contract" "$site/"
  find "$site/cxlab_runner" "$site/cxlab_contract" -name __pycache__ -prune -exec rm -rf {} +
  "$PYTHON" -m compileall -q "$site/cxlab_runner" "$site/cxlab_contract"
  finish_python_image "$dir" "$app" "$RUNNER_IMAGE" "$hash" runner
}

# The operator, laid out as in the repository: /app/operator/cxlab and
# /app/workloads/python/cxlab_contract (the contract it shares with the runners: the Result, its
# limits, durations, the histogram); its packages in the image's dist-packages. No runner: the
# operator starts runners in Pods of the runner image. Runs as 65532, nothing written outside /tmp.
build_operator() {
  local dir="$IMAGES/operator" hash app site pins
  build_base
  need_python311
  mapfile -t pins < <(read_pins operator)
  packages_layer operator "${pins[@]}"
  hash=$(hash_inputs "$IMAGES/base-bookworm/.inputs" "$IMAGES/packages-operator/.inputs" \
    "$ROOT/hack/image-requirements.py" \
    "$ROOT/operator/cxlab" "$ROOT/workloads/python/cxlab_contract" \
    "$ROOT/hack/images/docker-archive.py" "$ROOT/hack/images.sh" \
    -- "$OPERATOR_IMAGE" "$("$PYTHON" -VV)" "${pins[*]}")
  if [[ -f $dir/image.tar && $(cat "$dir/.inputs" 2>/dev/null) == "$hash" ]]; then return; fi
  log "building image $OPERATOR_IMAGE"
  rm -rf "$dir" && mkdir -p "$dir"
  app="$dir/app"
  mkdir -p "$app/app/operator" "$app/app/workloads/python" "$app/etc"
  chmod -R 0755 "$app"
  cp -r --preserve=timestamps "$ROOT/operator/cxlab" "$app/app/operator/"
  cp -r --preserve=timestamps "$ROOT/workloads/python/cxlab_contract" "$app/app/workloads/python/"
  find "$app/app" -name __pycache__ -prune -exec rm -rf {} +
  "$PYTHON" -m compileall -q "$app/app"
  finish_python_image "$dir" "$app" "$OPERATOR_IMAGE" "$hash" operator \
    --env PYTHONPATH=/app/operator:/app/workloads/python \
    --entrypoint python3 --entrypoint=-m --entrypoint cxlab.cli --entrypoint operator
}

# httpbin served by gunicorn: no code of this checkout, only its pinned packages (the
# service:httpbin pins, a packages layer cached per machine like the runner's). gunicorn's
# worker temporary files go to /tmp (its default --worker-tmp-dir), writable in Pods as an
# emptyDir or the container's own layer; nothing else is written.
build_httpbin() {
  local dir="$IMAGES/httpbin" hash app pins
  build_base
  need_python311
  mapfile -t pins < <(read_pins service:httpbin)
  packages_layer httpbin "${pins[@]}"
  hash=$(hash_inputs "$IMAGES/base-bookworm/.inputs" "$IMAGES/packages-httpbin/.inputs" \
    "$ROOT/hack/image-requirements.py" "$ROOT/hack/images/docker-archive.py" "$ROOT/hack/images.sh" \
    -- "$HTTPBIN_IMAGE" "$("$PYTHON" -VV)" "${pins[*]}")
  if [[ -f $dir/image.tar && $(cat "$dir/.inputs" 2>/dev/null) == "$hash" ]]; then return; fi
  log "building image $HTTPBIN_IMAGE"
  rm -rf "$dir" && mkdir -p "$dir"
  app="$dir/app"
  mkdir -p "$app/etc"
  chmod -R 0755 "$app"
  finish_python_image "$dir" "$app" "$HTTPBIN_IMAGE" "$hash" httpbin \
    --entrypoint python3 --entrypoint=-m --entrypoint gunicorn \
    --cmd=--bind --cmd 0.0.0.0:8080 --cmd httpbin:app
}

containerd_running() { [[ -S $CONTAINERD_SOCK ]] && ctr --address "$CONTAINERD_SOCK" version >/dev/null 2>&1; }

import_image() { # name tag
  local dir="$IMAGES/$1" tag=$2 hash
  hash=$(cat "$dir/.inputs")
  if ctr --address "$CONTAINERD_SOCK" -n k8s.io images ls "name==$tag" 2>/dev/null | grep -q "cxlab.dev/inputs=$hash"; then
    return
  fi
  log "importing $tag into containerd"
  ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "$dir/image.tar" >/dev/null
  ctr --address "$CONTAINERD_SOCK" -n k8s.io images label "$tag" "cxlab.dev/inputs=$hash" >/dev/null
}

mkdir -p "$IMAGES"
cluster_lock
build_pause
build_runner
build_operator
build_httpbin
import_all() {
  import_image pause "$PAUSE_IMAGE"; import_image runner "$RUNNER_IMAGE"
  import_image operator "$OPERATOR_IMAGE"; import_image httpbin "$HTTPBIN_IMAGE"
}
case $mode in
  --build) ;;
  --import) containerd_running || die "the cluster's containerd does not run (make cluster-up)"
    import_all ;;
  auto) if containerd_running; then
      import_all
    else
      log "images built; the cluster's containerd does not run, so make cluster-up will import them"
    fi ;;
  *) die "usage: $0 [--build|--import]" ;;
esac
