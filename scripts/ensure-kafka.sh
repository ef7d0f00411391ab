#!/usr/bin/env bash
# Apache Kafka's broker jars, pinned in kafka/pom.xml, resolved by Maven into kafka/libs, and each
# further line it lists (MirrorMaker 2's, the older brokers the tests run) from kafka/line.pom.xml
# into kafka/lines/<version> (all git-ignored). Installs Maven with apt when it is missing, like
# ensure-java.sh does for Java. Runs Maven only for what changed since the last successful run, so
# every setup after the first is offline.
set -euo pipefail
cd "$(dirname "$0")/.."

POM=kafka/pom.xml
LIBS=kafka/libs
# Kafka's tools jar (JmxTool, for the scale benchmark's broker request counts) lives apart: every
# jar in kafka/libs joins the brokers' classpath and class-data-sharing archive.
TOOLS=kafka/tools
STAMP=$LIBS/.resolved
LINE_POM=kafka/line.pom.xml
LINES=kafka/lines
property() { sed -n "s:.*<$1>\(.*\)</$1>.*:\1:p" "$POM"; }
VERSION=$(property kafka.version)
# Every further line once: MM2's and the test lines (comma or space separated).
EXTRA=$( (property mirrormaker.version; property kafka.test.lines | tr ', ' '\n\n') | grep . | sort -u)
want=$(sha256sum "$POM" | cut -d' ' -f1)
line_want=$(sha256sum "$LINE_POM" | cut -d' ' -f1)
missing_lines() {
    for v in $EXTRA; do
        [ -f "$LINES/$v/.resolved" ] && [ "$(cat "$LINES/$v/.resolved")" = "$line_want" ] || echo "$v"
    done
}
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -f "$TOOLS/kafka-tools-$VERSION.jar" ] \
    && [ -z "$(missing_lines)" ]; then
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

if ! { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -f "$TOOLS/kafka-tools-$VERSION.jar" ]; }; then
    echo "Resolving Apache Kafka $VERSION from Maven Central into $LIBS and $TOOLS..." >&2
    rm -rf "$LIBS.partial"
    mvn -q -B -f "$POM" dependency:copy-dependencies -DoutputDirectory="$PWD/$LIBS.partial" -DincludeScope=runtime
    mvn -q -B -f "$POM" dependency:copy -Dartifact="org.apache.kafka:kafka-tools:$VERSION" -DoutputDirectory="$PWD/$TOOLS"
    rm -rf "$LIBS"
    mv "$LIBS.partial" "$LIBS"
    echo "$want" > "$STAMP"
fi

for v in $(missing_lines); do
    # Kafka 4 logs through log4j2, Kafka 3 through reload4j: the line pom adds the matching binding.
    logging=$([ "${v%%.*}" -ge 4 ] && echo log4j2 || echo reload4j)
    echo "Resolving Apache Kafka $v (broker and MirrorMaker 2) into $LINES/$v..." >&2
    rm -rf "$LINES/$v.partial"
    mvn -q -B -f "$LINE_POM" dependency:copy-dependencies -Dline.version="$v" -Dline.logging="$logging" \
        -DoutputDirectory="$PWD/$LINES/$v.partial" -DincludeScope=runtime
    rm -rf "${LINES:?}/$v"
    mv "$LINES/$v.partial" "$LINES/$v"
    echo "$line_want" > "$LINES/$v/.resolved"
done
