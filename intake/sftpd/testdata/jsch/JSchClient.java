// A partner's Java integration as JSch 0.1.55 (Debian libjsch-java) writes
// it: the host key checked against known_hosts, a key file, one put or get.
// The tests of intake/sftpd and cmd/payintake compile and run it.
//
// Arguments: host port user key known_hosts put|get local remote [bind],
// bind being the local address to connect from (a partner's host of its
// own behind a load balancer); without it the system chooses.

import com.jcraft.jsch.*;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;

public class JSchClient {
    public static void main(String[] a) throws Exception {
        String host = a[0], user = a[2], key = a[3], knownHosts = a[4], op = a[5], local = a[6], remote = a[7];
        JSch jsch = new JSch();
        jsch.setKnownHosts(knownHosts);
        jsch.addIdentity(key);
        Session s = jsch.getSession(user, host, Integer.parseInt(a[1]));
        if (a.length > 8) {
            s.setSocketFactory(new BoundSocketFactory(a[8]));
        }
        s.setConfig("StrictHostKeyChecking", "yes");
        s.setConfig("PreferredAuthentications", "publickey");
        s.connect(15000);
        ChannelSftp c = (ChannelSftp) s.openChannel("sftp");
        c.connect(15000);
        if (op.equals("put")) {
            c.put(local, remote);
        } else {
            c.get(remote, local);
        }
        System.out.println("ok host key " + s.getHostKey().getType());
        c.disconnect();
        s.disconnect();
    }

    // BoundSocketFactory connects from one local address: JSch has no
    // option for it, a socket factory is how an integration does it.
    static class BoundSocketFactory implements SocketFactory {
        private final String bind;

        BoundSocketFactory(String bind) {
            this.bind = bind;
        }

        public Socket createSocket(String host, int port) throws java.io.IOException {
            Socket so = new Socket();
            so.bind(new InetSocketAddress(bind, 0));
            so.connect(new InetSocketAddress(host, port), 15000);
            return so;
        }

        public InputStream getInputStream(Socket so) throws java.io.IOException {
            return so.getInputStream();
        }

        public OutputStream getOutputStream(Socket so) throws java.io.IOException {
            return so.getOutputStream();
        }
    }
}
