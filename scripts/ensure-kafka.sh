#!/usr/bin/env bash
# Apache Kafka's broker and MirrorMaker 2 jars, pinned in kafka/pom.xml, resolved by Maven into
# kafka/libs (git-ignored). Installs Maven with apt when it is missing, like ensure-java.sh does
# for Java. Runs Maven only when kafka/pom.xml changed since the last successful run, so every
# setup after the first is offline.
set -euo pipefail
cd "$(dirname "$0")/.."

POM=kafka/pom.xml
LIBS=kafka/libs
# Kafka's tools jar (JmxTool, for the scale benchmark's broker request counts) lives apart: every
# jar in kafka/libs joins the brokers' classpath and class-data-sharing archive.
TOOLS=kafka/tools
STAMP=$LIBS/.resolved
VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
want=$(sha256sum "$POM" | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -f "$TOOLS/kafka-tools-$VERSION.jar" ]; then
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

echo "Resolving Apache Kafka $VERSION from Maven Central into $LIBS and $TOOLS..." >&2
rm -rf "$LIBS.partial"
mvn -q -B -f "$POM" dependency:copy-dependencies -DoutputDirectory="$PWD/$LIBS.partial" -DincludeScope=runtime
mvn -q -B -f "$POM" dependency:copy -Dartifact="org.apache.kafka:kafka-tools:$VERSION" -DoutputDirectory="$PWD/$TOOLS"
rm -rf "$LIBS"
mv "$LIBS.partial" "$LIBS"
echo "$want" > "$STAMP"
