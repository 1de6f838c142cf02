// A partner's notification receiver for the tests of package notify, built
// on the official Standard Webhooks library (npm standardwebhooks).
//
//   node receiver.js FAILURES SECRET...
//
// It listens on 127.0.0.1 (an ephemeral port, printed as the first line:
// {"port": N}), answers the first FAILURES requests with 503 and then 500
// (Retry-After: 3 on the second), and every later one by verifying it with
// the first SECRET: 204 when the signature verifies, 401 when it does not.
// For every request it prints one JSON line: its number, the three
// Standard Webhooks headers, the body, and whether Webhook(secret).verify
// accepted it, for each SECRET in order.
const http = require("http");
const { Webhook } = require("standardwebhooks");

const failures = parseInt(process.argv[2], 10);
const secrets = process.argv.slice(3);
let n = 0;

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    n++;
    const body = Buffer.concat(chunks).toString("utf8");
    const headers = {
      "webhook-id": req.headers["webhook-id"],
      "webhook-timestamp": req.headers["webhook-timestamp"],
      "webhook-signature": req.headers["webhook-signature"],
    };
    const verified = secrets.map((s) => {
      try {
        new Webhook(s).verify(body, headers);
        return true;
      } catch (e) {
        return false;
      }
    });
    console.log(JSON.stringify({ n, method: req.method, content_type: req.headers["content-type"], headers, body, verified }));
    if (n <= failures) {
      if (n % 2 === 0) {
        res.writeHead(500, { "Retry-After": "3" });
      } else {
        res.writeHead(503);
      }
      res.end("not now");
      return;
    }
    res.writeHead(verified[0] ? 204 : 401);
    res.end();
  });
});
server.listen(0, "127.0.0.1", () => {
  console.log(JSON.stringify({ port: server.address().port }));
});
process.stdin.on("end", () => process.exit(0)); // the test ended
process.stdin.resume();
