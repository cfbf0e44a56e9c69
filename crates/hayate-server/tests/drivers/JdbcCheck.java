import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * The PostgreSQL JDBC driver, unmodified, against Hayate: DDL, parameterized statements
 * (server-side prepared once past the driver's prepareThreshold), explicit transactions with
 * commit and rollback, a unique violation's SQLSTATE, and the DatabaseMetaData calls
 * BenchBase and ORMs make at start (primary keys, imported and exported keys, index info).
 * Exits non-zero on the first difference from PostgreSQL's behaviour.
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

    /** What BenchBase and ORMs ask the driver about the schema. */
    static void metadata(Connection conn) throws SQLException {
        try (Statement st = conn.createStatement()) {
            st.execute("CREATE TABLE jparent (a int, b int, PRIMARY KEY (b, a))");
            st.execute("CREATE TABLE jchild (id int PRIMARY KEY, pa int, pb int, note text, "
                + "FOREIGN KEY (pb, pa) REFERENCES jparent (b, a) ON DELETE CASCADE)");
            st.execute("CREATE INDEX jchild_note ON jchild (note, id)");
        }
        conn.commit();
        DatabaseMetaData meta = conn.getMetaData();
        try (ResultSet rs = meta.getPrimaryKeys(null, "public", "jparent")) {
            StringBuilder keys = new StringBuilder();
            while (rs.next()) {
                keys.append(rs.getString("COLUMN_NAME")).append(rs.getInt("KEY_SEQ")).append(' ');
            }
            check(keys.toString(), "b1 a2 ", "getPrimaryKeys");
        }
        try (ResultSet rs = meta.getImportedKeys(null, "public", "jchild")) {
            StringBuilder keys = new StringBuilder();
            while (rs.next()) {
                keys.append(rs.getString("FKCOLUMN_NAME")).append("->")
                    .append(rs.getString("PKTABLE_NAME")).append('.')
                    .append(rs.getString("PKCOLUMN_NAME")).append(rs.getInt("KEY_SEQ"))
                    .append(rs.getInt("DELETE_RULE") == DatabaseMetaData.importedKeyCascade ? "c " : "? ");
            }
            check(keys.toString(), "pb->jparent.b1c pa->jparent.a2c ", "getImportedKeys");
        }
        try (ResultSet rs = meta.getExportedKeys(null, "public", "jparent")) {
            int count = 0;
            while (rs.next()) {
                check(rs.getString("FKTABLE_NAME"), "jchild", "getExportedKeys");
                count++;
            }
            check(count, 2, "getExportedKeys columns");
        }
        try (ResultSet rs = meta.getIndexInfo(null, "public", "jchild", false, false)) {
            StringBuilder indexes = new StringBuilder();
            while (rs.next()) {
                indexes.append(rs.getString("INDEX_NAME")).append(':')
                    .append(rs.getString("COLUMN_NAME")).append(rs.getInt("ORDINAL_POSITION"))
                    .append(rs.getBoolean("NON_UNIQUE") ? "n " : "u ");
            }
            check(indexes.toString(), "jchild_pkey:id1u jchild_note:note1n jchild_note:id2n ",
                "getIndexInfo");
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
            metadata(conn);
        }
        System.out.println("jdbc ok");
    }
}
