#!/usr/bin/env bash
# Apache Kafka's broker and MirrorMaker 2 jars, pinned in kafka/pom.xml, resolved by Maven into
# kafka/libs (git-ignored). Installs Maven with apt when it is missing, like ensure-java.sh does
# for Java. Runs Maven only when kafka/pom.xml changed since the last successful run, so every
# setup after the first is offline.
set -euo pipefail
cd "$(dirname "$0")/.."

POM=kafka/pom.xml
LIBS=kafka/libs
STAMP=$LIBS/.resolved
want=$(sha256sum "$POM" | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
    exit 0
fi

if ! command -v mvn >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null; }; then
        SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo "sudo -n")
        echo "Installing Maven (it resolves the pinned Kafka jars)..." >&2
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq maven >/dev/null
    else
        echo "Maven is needed to fetch the pinned Kafka jars and was not found; install it with:" >&2
        echo "  sudo apt-get install -y maven" >&2
        exit 1
    fi
fi

echo "Resolving Apache Kafka $(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM") from Maven Central into $LIBS..." >&2
rm -rf "$LIBS.partial"
mvn -q -B -f "$POM" dependency:copy-dependencies -DoutputDirectory="$PWD/$LIBS.partial" -DincludeScope=runtime
rm -rf "$LIBS"
mv "$LIBS.partial" "$LIBS"
echo "$want" > "$STAMP"
