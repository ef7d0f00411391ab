import org.apache.kafka.server.common.MetadataVersion;

/** Prints the MetadataVersions of the Kafka jars on the classpath up to the latest production one,
 *  "featureLevel name" per line. */
public class MetadataVersions {
    public static void main(String[] args) {
        for (MetadataVersion version : MetadataVersion.VERSIONS) {
            if (version.featureLevel() <= MetadataVersion.LATEST_PRODUCTION.featureLevel()) {
                System.out.println(version.featureLevel() + " " + version.version());
            }
        }
    }
}
