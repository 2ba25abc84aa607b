// An ActiveMQ broker for the keda-rs tests, with the Jolokia REST API where ActiveMQ's web
// console serves it (/api/jolokia). Debian's activemq package leaves out the web console (and
// with it Jolokia), so this starts the broker of Debian's activemq libraries in process and
// serves Debian's Jolokia (libjolokia-core-java) over the JDK's HTTP server, behind HTTP basic
// authentication and with ActiveMQ's own Jolokia policy (jolokia-access.xml: read-only
// commands, an Origin or Referer header required), as a stock ActiveMQ does.
//
// Usage: java KedaRsActiveMq <brokerName> <jolokiaPort> <stompPort> <user> <password> <policy.xml>
// Everything listens on 127.0.0.1 only. Messages are sent over STOMP.

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import org.apache.activemq.broker.BrokerService;
import org.jolokia.backend.BackendManager;
import org.jolokia.config.ConfigKey;
import org.jolokia.config.Configuration;
import org.jolokia.http.HttpRequestHandler;
import org.jolokia.restrictor.PolicyRestrictor;
import org.jolokia.util.LogHandler;
import org.json.simple.JSONAware;

public final class KedaRsActiveMq {
    private static final String CONTEXT = "/api/jolokia";

    public static void main(String[] args) throws Exception {
        String brokerName = args[0];
        int jolokiaPort = Integer.parseInt(args[1]);
        int stompPort = Integer.parseInt(args[2]);
        String expected = "Basic " + Base64.getEncoder()
            .encodeToString((args[3] + ":" + args[4]).getBytes(StandardCharsets.UTF_8));

        BrokerService broker = new BrokerService();
        broker.setBrokerName(brokerName);
        broker.setPersistent(false);
        broker.setUseJmx(true);
        // JMX stays in process: no RMI connector port.
        broker.getManagementContext().setCreateConnector(false);
        broker.addConnector("stomp://127.0.0.1:" + stompPort);
        broker.start();
        broker.waitUntilStarted();

        LogHandler log = new LogHandler.StdoutLogHandler(false);
        Configuration config = new Configuration(ConfigKey.AGENT_ID, "keda-rs-activemq");
        PolicyRestrictor policy;
        try (InputStream in = new FileInputStream(args[5])) {
            policy = new PolicyRestrictor(in);
        }
        BackendManager backend = new BackendManager(config, log, policy);
        HttpRequestHandler handler = new HttpRequestHandler(config, backend, log);

        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", jolokiaPort), 0);
        server.createContext(CONTEXT, exchange -> {
            try {
                serve(exchange, handler, expected);
            } catch (Exception e) {
                exchange.sendResponseHeaders(500, -1);
            } finally {
                exchange.close();
            }
        });
        server.start();
        System.out.println("keda-rs activemq: broker " + brokerName + " up; Jolokia on 127.0.0.1:"
            + jolokiaPort + CONTEXT + ", STOMP on 127.0.0.1:" + stompPort);
    }

    private static void serve(HttpExchange exchange, HttpRequestHandler handler, String expected)
            throws Exception {
        if (!expected.equals(exchange.getRequestHeaders().getFirst("Authorization"))) {
            exchange.getResponseHeaders().add("WWW-Authenticate", "Basic realm=\"activemq\"");
            exchange.sendResponseHeaders(401, -1);
            return;
        }
        String origin = exchange.getRequestHeaders().getFirst("Origin");
        if (origin == null) {
            origin = exchange.getRequestHeaders().getFirst("Referer");
        }
        String address = exchange.getRemoteAddress().getAddress().getHostAddress();
        try {
            handler.checkAccess(address, address, origin);
        } catch (SecurityException e) {
            exchange.sendResponseHeaders(403, -1);
            return;
        }
        if (!"GET".equals(exchange.getRequestMethod())) {
            exchange.sendResponseHeaders(405, -1);
            return;
        }
        String path = exchange.getRequestURI().getPath();
        String pathInfo = path.length() > CONTEXT.length() ? path.substring(CONTEXT.length()) : "/";
        Map<String, String[]> params = new HashMap<>();
        String query = exchange.getRequestURI().getRawQuery();
        if (query != null) {
            for (String pair : query.split("&")) {
                String[] kv = pair.split("=", 2);
                String key = URLDecoder.decode(kv[0], StandardCharsets.UTF_8);
                String value = kv.length > 1 ? URLDecoder.decode(kv[1], StandardCharsets.UTF_8) : "";
                params.put(key, new String[] {value});
            }
        }
        JSONAware json;
        try {
            json = handler.handleGetRequest(exchange.getRequestURI().toString(), pathInfo, params);
        } catch (Throwable t) {
            json = handler.handleThrowable(t);
        }
        // As Jolokia's servlet does: HTTP 200, the request's own status in the JSON.
        byte[] body = json.toJSONString().getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().add("Content-Type", "application/json; charset=utf-8");
        exchange.sendResponseHeaders(200, body.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(body);
        }
    }
}
