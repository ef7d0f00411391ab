// Kafka's own RemoteClusterUtils.translateOffsets (connect-mirror-client), for
// tests/mm2/test_translate_offsets_java.py. Arguments: BOOTSTRAP REMOTE_ALIAS GROUP...
// For each group it prints one line per partition the checkpoints name:
// "GROUP TOPIC PARTITION OFFSET METADATA_HEX", sorted, so Python can compare them as text.
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class TranslateOffsets {
    public static void main(String[] args) throws Exception {
        Map<String, Object> properties = new HashMap<>();
        properties.put("bootstrap.servers", args[0]);
        String remoteAlias = args[1];
        List<String> lines = new ArrayList<>();
        for (int i = 2; i < args.length; i++) {
            String group = args[i];
            Map<TopicPartition, OffsetAndMetadata> offsets =
                RemoteClusterUtils.translateOffsets(properties, remoteAlias, group, Duration.ofSeconds(30));
            for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : offsets.entrySet()) {
                String metadata = entry.getValue().metadata();
                lines.add(String.join(" ", group, entry.getKey().topic(), "" + entry.getKey().partition(),
                    "" + entry.getValue().offset(),
                    HexFormat.of().formatHex(metadata.getBytes(StandardCharsets.UTF_8))));
            }
        }
        Collections.sort(lines);
        lines.forEach(System.out::println);
    }
}
