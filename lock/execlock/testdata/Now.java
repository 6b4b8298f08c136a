// A protocol client for the clock test: each grant's token is the JVM's clock, in whole seconds since
// the epoch (System.currentTimeMillis), so the test sees the time the JVM reads. It holds no lock.
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class Now {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String id = line.replaceAll(".*\"id\":(\\d+).*", "$1");
            System.out.println("{\"id\":" + id + ",\"ok\":true,\"token\":" + System.currentTimeMillis() / 1000 + "}");
            System.out.flush();
        }
    }
}
