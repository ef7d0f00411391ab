#!/usr/bin/env bash
# Spark 4 and Kafka need Java 17 or newer, and the MM2 interoperability tests compile a small
# Java program (javac). Use what is there; otherwise install Debian's headless JDK when we may
# (root or passwordless sudo), else say exactly what to do.
set -euo pipefail

java_major() {
    java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

if command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ]; then
    exit 0
fi

if command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        SUDO=""
    elif sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "A Java 17+ JDK (java and javac) is required and was not found; install it with:" >&2
        echo "  sudo apt-get install -y openjdk-17-jdk-headless" >&2
        exit 1
    fi
    echo "Installing a Java 17 JDK (Spark and Kafka run on it; MM2 interop tests compile a small Java program)..." >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
    exit 0
fi

echo "A Java 17+ JDK is required (Spark, Kafka, javac) and was not found. Install one and put java and javac on PATH." >&2
exit 1
