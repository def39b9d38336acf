#!/usr/bin/env bash
# Installs the Debian packages qwenrt builds and tests with (chromium and chromium-driver: the chat
# page's browser test). Safe to run again: it installs only what is missing.
set -euo pipefail
packages=(g++ cmake ninja-build nlohmann-json3-dev libgtest-dev libedit-dev libbsd-dev libmd-dev libncurses-dev clang libclang-rt-14-dev python3 libcpp-httplib-dev chromium chromium-driver)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi
