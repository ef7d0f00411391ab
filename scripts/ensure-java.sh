#!/usr/bin/env bash
# Spark 4 needs Java 17 or newer. Use what is there; otherwise install Debian's headless
# JRE when we may (root or passwordless sudo), else say exactly what to do.
set -euo pipefail

java_major() {
    java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ]; then
    exit 0
fi

if command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        SUDO=""
    elif sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "Java 17+ is required by Spark and was not found; install it with:" >&2
        echo "  sudo apt-get install -y openjdk-17-jre-headless" >&2
        exit 1
    fi
    echo "Installing a headless Java 17 runtime (Spark needs it)..." >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
    exit 0
fi

echo "Java 17+ is required by Spark and was not found. Install a JDK/JRE 17 or newer and put java on PATH." >&2
exit 1
