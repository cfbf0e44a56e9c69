import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * The PostgreSQL JDBC driver, unmodified, against Hayate: DDL, parameterized statements
 * (server-side prepared once past the driver's prepareThreshold), explicit transactions with
 * commit and rollback, and a unique violation's SQLSTATE. Exits non-zero on the first
 * difference from PostgreSQL's behaviour.
 */
public class JdbcCheck {
    static void check(Object actual, Object expected, String what) {
        if (!expected.equals(actual)) {
            throw new AssertionError(what + ": expected " + expected + ", got " + actual);
        }
    }

    static long sum(Connection conn) throws SQLException {
        try (Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("SELECT sum(balance) FROM jaccounts")) {
            rs.next();
            return rs.getLong(1);
        }
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/test";
        try (Connection conn = DriverManager.getConnection(url, "tester", "")) {
            try (Statement st = conn.createStatement()) {
                st.execute("CREATE TABLE jaccounts (id int PRIMARY KEY, owner varchar(20) NOT NULL, balance bigint)");
            }
            try (PreparedStatement ps = conn.prepareStatement("INSERT INTO jaccounts VALUES (?, ?, ?)")) {
                for (int i = 0; i < 10; i++) {
                    ps.setInt(1, i);
                    ps.setString(2, "o" + i);
                    ps.setLong(3, 100);
                    check(ps.executeUpdate(), 1, "insert count");
                }
            }
            conn.setAutoCommit(false);
            try (PreparedStatement ps = conn.prepareStatement("UPDATE jaccounts SET balance = balance + ? WHERE id = ?")) {
                ps.setLong(1, -30);
                ps.setInt(2, 1);
                ps.executeUpdate();
                ps.setLong(1, 30);
                ps.setInt(2, 2);
                ps.executeUpdate();
            }
            conn.rollback();
            check(sum(conn), 1000L, "sum after rollback");
            try (PreparedStatement ps = conn.prepareStatement("UPDATE jaccounts SET balance = balance + ? WHERE id = ?")) {
                ps.setLong(1, -30);
                ps.setInt(2, 1);
                ps.executeUpdate();
                ps.setLong(1, 30);
                ps.setInt(2, 2);
                ps.executeUpdate();
            }
            conn.commit();
            try (PreparedStatement ps = conn.prepareStatement("SELECT owner, balance FROM jaccounts WHERE id = ?")) {
                for (int i = 0; i < 8; i++) {
                    ps.setInt(1, 2);
                    try (ResultSet rs = ps.executeQuery()) {
                        check(rs.next(), true, "row found");
                        check(rs.getString(1), "o2", "owner");
                        check(rs.getLong(2), 130L, "balance after transfer");
                    }
                }
            }
            try (Statement st = conn.createStatement()) {
                st.executeUpdate("INSERT INTO jaccounts VALUES (1, 'dup', 0)");
                throw new AssertionError("duplicate key accepted");
            } catch (SQLException e) {
                check(e.getSQLState(), "23505", "unique violation");
            }
            conn.rollback();
            check(sum(conn), 1000L, "sum after the transfer");
            conn.commit();
        }
        System.out.println("jdbc ok");
    }
}
