// pgJDBC's multi-host failover against an etcd-coordinated Hayate cluster (tests/ha_etcd.rs):
// the URL lists every node and targetServerType=primary makes the driver skip standbys (it
// reads transaction_read_only), as applications configure it.
//
// java -cp postgresql.jar JdbcFailover.java HOSTS ID, HOSTS like 127.0.0.1:5433,127.0.0.1:5434
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;

public class JdbcFailover {
    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://" + args[0]
            + "/postgres?user=tester&targetServerType=primary&connectTimeout=2";
        try (Connection connection = DriverManager.getConnection(url);
             PreparedStatement insert =
                 connection.prepareStatement("INSERT INTO acked VALUES (?, 'jdbc')")) {
            insert.setLong(1, Long.parseLong(args[1]));
            if (insert.executeUpdate() != 1) {
                throw new AssertionError("one row expected");
            }
        }
        System.out.println("jdbc ok");
    }
}
