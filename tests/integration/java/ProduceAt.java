import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Writes one record per timestamp argument with Kafka's Java producer, which (unlike
 *  librdkafka) can write a CreateTime of 0. Usage: ProduceAt BOOTSTRAP TOPIC TIMESTAMP... */
public class ProduceAt {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("acks", "all");
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 2; i < args.length; i++) {
                long timestamp = Long.parseLong(args[i]);
                byte[] value = ("at-" + timestamp).getBytes("UTF-8");
                producer.send(new ProducerRecord<>(args[1], 0, timestamp, null, value)).get();
            }
        }
    }
}
