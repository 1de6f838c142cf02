package main

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// haproxyEnv is the environment deploy/haproxy/haproxy.cfg reads its
// addresses from: where HAProxy listens, and each replica's SFTP and HTTP
// address.
func haproxyEnv(t testing.TB, sftpBind, httpBind string, replicas [3]struct{ SFTP, HTTP string }) []string {
	t.Helper()
	env := append(os.Environ(), "PAYINTAKE_SFTP_BIND="+sftpBind, "PAYINTAKE_HTTP_BIND="+httpBind)
	for i, r := range replicas {
		host, port, err := net.SplitHostPort(r.HTTP)
		if err != nil {
			t.Fatal(err)
		}
		p := "PAYINTAKE_REPLICA" + strconv.Itoa(i+1) + "_"
		env = append(env, p+"SFTP="+r.SFTP, p+"HTTP_HOST="+host, p+"HTTP_PORT="+port)
	}
	return env
}

// TestHAProxyConfig: the shipped HAProxy configuration is one Debian's
// HAProxy accepts (haproxy -c).
func TestHAProxyConfig(t *testing.T) {
	cmd := exec.Command("haproxy", "-c", "-f", "../../deploy/haproxy/haproxy.cfg")
	cmd.Env = haproxyEnv(t, "127.0.0.1:12022", "127.0.0.1:18080", [3]struct{ SFTP, HTTP string }{
		{"127.0.0.1:2201", "127.0.0.1:8081"}, {"127.0.0.1:2202", "127.0.0.1:8082"}, {"127.0.0.1:2203", "127.0.0.1:8083"}})
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
}
