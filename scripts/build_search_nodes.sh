#!/usr/bin/env bash
# Build the search engines tests/backends/test_search_stores.py runs Jaeger v2's OpenSearch and Elasticsearch stores
# on: for each project under tests/backends/search_nodes/ (opensearch, elasticsearch), the engine's own server jar
# and netty4 module from Maven Central, one small main class that starts a single node from the classpath, and a
# launcher. The registries reachable here serve no OpenSearch or Elasticsearch distribution; their jars run a real
# node all the same. Needs Java 17 and Maven (on this kind of machine already); ~5 s a project with a warm ~/.m2.
#
# Cache: ${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}/<name>-<version>-<hash>/{lib,classes},
#        launchers bin/<name>-node HOME HTTP_PORT TRANSPORT_PORT (JVM options: SEARCH_NODE_JAVA_OPTS)
# Usage: scripts/build_search_nodes.sh [--force]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}"
mkdir -p "$CACHE/bin"
for tool in java javac mvn; do
    command -v "$tool" >/dev/null || { echo "build_search_nodes: $tool is required (Java 17 and Maven)" >&2; exit 1; }
done

for project in "$ROOT"/tests/backends/search_nodes/*/; do
    name="$(basename "$project")"
    version="$(sed -n 's:.*<node.version>\(.*\)</node.version>.*:\1:p' "$project/pom.xml")"
    sources=("$project"/src/main/java/otel_verl/*.java)
    main="otel_verl.$(basename "${sources[0]}" .java)"
    hash="$(cat "$project/pom.xml" "${sources[@]}" | sha256sum | cut -c1-12)"
    dest="$CACHE/$name-$version-$hash"
    if [[ "${1:-}" == "--force" || ! -d "$dest/classes/otel_verl" ]]; then
        start=$SECONDS
        rm -rf "$dest.tmp" && mkdir -p "$dest.tmp/classes"
        # Maven's output only when it fails (a quiet 3.8 run still prints colour codes)
        out="$(mvn -q -B -f "$project/pom.xml" dependency:copy-dependencies -DoutputDirectory="$dest.tmp/lib" 2>&1)" \
            || { echo "$out" >&2; echo "build_search_nodes: mvn failed for $name" >&2; exit 1; }
        javac -d "$dest.tmp/classes" -cp "$dest.tmp/lib/*" "${sources[@]}"
        rm -rf "$dest" && mv "$dest.tmp" "$dest"
        echo "$name-node: built $name $version in $((SECONDS - start)) s"
    else
        echo "$name-node: cached $dest"
    fi
    cat > "$CACHE/bin/$name-node" <<LAUNCH
#!/usr/bin/env bash
# $name $version, one node: $name-node HOME HTTP_PORT TRANSPORT_PORT (scripts/build_search_nodes.sh)
exec java \${SEARCH_NODE_JAVA_OPTS:--Xms256m -Xmx512m} -cp "$dest/classes:$dest/lib/*" $main "\$@"
LAUNCH
    chmod +x "$CACHE/bin/$name-node"
done
