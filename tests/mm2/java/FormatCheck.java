// Decodes and encodes MM2's internal-topic records with MirrorMaker 2's own classes, for
// tests/mm2/test_formats_java.py. Reads lines "KIND KEY_HEX VALUE_HEX" (KIND: OffsetSync,
// Checkpoint, Heartbeat) and prints, per line, the fields MM2 decodes (strings as UTF-8 hex)
// and the key and value MM2's schemas encode from those fields.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.Struct;
import org.apache.kafka.connect.mirror.Checkpoint;
import org.apache.kafka.connect.mirror.Heartbeat;
import org.apache.kafka.connect.mirror.OffsetSync;

public class FormatCheck {
    static final HexFormat HEX = HexFormat.of();

    static String text(String s) {
        return HEX.formatHex(s.getBytes(StandardCharsets.UTF_8));
    }

    static String bytes(Struct struct, Schema schema) {
        ByteBuffer buffer = ByteBuffer.allocate(schema.sizeOf(struct));
        schema.write(buffer, struct);
        return HEX.formatHex(buffer.array());
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ", -1);
            ConsumerRecord<byte[], byte[]> record = new ConsumerRecord<>(
                "t", 0, 0L, HEX.parseHex(parts[1]), HEX.parseHex(parts[2]));
            switch (parts[0]) {
                case "OffsetSync" -> {
                    OffsetSync s = OffsetSync.deserializeRecord(record);
                    Struct key = new Struct(OffsetSync.KEY_SCHEMA)
                        .set("topic", s.topicPartition().topic()).set("partition", s.topicPartition().partition());
                    Struct value = new Struct(OffsetSync.VALUE_SCHEMA)
                        .set("upstreamOffset", s.upstreamOffset()).set("offset", s.downstreamOffset());
                    System.out.println(String.join(" ", "OffsetSync", text(s.topicPartition().topic()),
                        "" + s.topicPartition().partition(), "" + s.upstreamOffset(), "" + s.downstreamOffset(),
                        bytes(key, OffsetSync.KEY_SCHEMA), bytes(value, OffsetSync.VALUE_SCHEMA)));
                }
                case "Checkpoint" -> {
                    Checkpoint c = Checkpoint.deserializeRecord(record);
                    Struct key = new Struct(Checkpoint.KEY_SCHEMA).set("group", c.consumerGroupId())
                        .set("topic", c.topicPartition().topic()).set("partition", c.topicPartition().partition());
                    Struct value = new Struct(Checkpoint.VALUE_SCHEMA_V0).set("upstreamOffset", c.upstreamOffset())
                        .set("offset", c.downstreamOffset()).set("metadata", c.metadata());
                    Struct header = new Struct(Checkpoint.HEADER_SCHEMA).set("version", Checkpoint.VERSION);
                    System.out.println(String.join(" ", "Checkpoint", text(c.consumerGroupId()),
                        text(c.topicPartition().topic()), "" + c.topicPartition().partition(),
                        "" + c.upstreamOffset(), "" + c.downstreamOffset(), text(c.metadata()),
                        bytes(key, Checkpoint.KEY_SCHEMA),
                        bytes(header, Checkpoint.HEADER_SCHEMA) + bytes(value, Checkpoint.VALUE_SCHEMA_V0)));
                }
                case "Heartbeat" -> {
                    Heartbeat h = Heartbeat.deserializeRecord(record);
                    Struct key = new Struct(Heartbeat.KEY_SCHEMA).set("sourceClusterAlias", h.sourceClusterAlias())
                        .set("targetClusterAlias", h.targetClusterAlias());
                    Struct value = new Struct(Heartbeat.VALUE_SCHEMA_V0).set("timestamp", h.timestamp());
                    Struct header = new Struct(Heartbeat.HEADER_SCHEMA).set("version", Heartbeat.VERSION);
                    System.out.println(String.join(" ", "Heartbeat", text(h.sourceClusterAlias()),
                        text(h.targetClusterAlias()), "" + h.timestamp(), bytes(key, Heartbeat.KEY_SCHEMA),
                        bytes(header, Heartbeat.HEADER_SCHEMA) + bytes(value, Heartbeat.VALUE_SCHEMA_V0)));
                }
                default -> throw new IllegalArgumentException("unknown kind " + parts[0]);
            }
        }
    }
}
