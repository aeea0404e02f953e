package otel_verl;

import java.nio.file.Path;
import java.util.Collections;
import java.util.List;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.node.InternalSettingsPreparer;
import org.elasticsearch.node.Node;
import org.elasticsearch.transport.Netty4Plugin;

/**
 * One single-node Elasticsearch cluster in this JVM, HTTP on 127.0.0.1, until the process is stopped: what the
 * distribution's bin/elasticsearch starts, minus its bootstrap checks, security manager and plugins.
 *
 * <p>Usage: {@code EmbeddedElasticsearch HOME HTTP_PORT TRANSPORT_PORT} (HOME: an empty directory for data and logs).
 */
public final class EmbeddedElasticsearch extends Node {
    private EmbeddedElasticsearch(Settings settings) {
        super(
            InternalSettingsPreparer.prepareEnvironment(settings, Collections.emptyMap(), null, () -> "verl-node"),
            List.of(Netty4Plugin.class),
            true);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: EmbeddedElasticsearch HOME HTTP_PORT TRANSPORT_PORT");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        Settings settings = Settings.builder()
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("cluster.name", "otel-verl-test")
            .put("node.name", "verl-node")
            .put("discovery.type", "single-node")
            .put("network.host", "127.0.0.1")
            .put("http.port", args[1])
            .put("transport.port", args[2])
            .put("http.type", "netty4")
            .put("transport.type", "netty4")
            // a test machine's disk may be nearly full: never refuse to allocate a shard for it
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .build();
        EmbeddedElasticsearch node = new EmbeddedElasticsearch(settings);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
            } catch (Exception e) {
                // stopping anyway
            }
        }));
        node.start();
        System.out.println("elasticsearch " + org.elasticsearch.Version.CURRENT + " on http://127.0.0.1:" + args[1]);
        Thread.currentThread().join();
    }
}
