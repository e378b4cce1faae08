#!/usr/bin/env bash
# Debian packages for the commands that are missing (lib.sh need_pkgs), for the Makefile:
#   hack/need-pkgs.sh [--recommends] cmd:package ...
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_pkgs "$@"
