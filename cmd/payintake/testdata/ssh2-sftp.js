// Node.js's SFTP client (ssh2-sftp-client, on ssh2), as partners' scripts
// use it: one put (fastPut: parallel writes) or get, trusting only the host
// keys given.
//
//   node ssh2-sftp.js HOST PORT USER KEY_FILE LOCAL_ADDRESS HOST_KEYS put|get LOCAL REMOTE
//
// HOST_KEYS: the server's public key blobs, base64, comma-separated. Prints
// "ok put" or "ok get"; on failure, why, and exits 1.
'use strict';
const fs = require('fs');
const Client = require('ssh2-sftp-client');

const [host, port, username, keyFile, localAddress, hostKeys, op, local, remote] = process.argv.slice(2);
const known = new Set(hostKeys.split(','));
let shown = '';
const sftp = new Client();

(async () => {
  await sftp.connect({
    host, port: Number(port), username, localAddress,
    privateKey: fs.readFileSync(keyFile),
    readyTimeout: 20000,
    // Without hostHash, ssh2 gives the host key's blob.
    hostVerifier: (key) => {
      shown = key.toString('base64');
      return known.has(shown);
    },
  });
  if (op === 'put') {
    await sftp.fastPut(local, remote);
  } else if (op === 'get') {
    await sftp.get(remote, local);
  } else {
    throw new Error(`unknown operation ${op}: put or get`);
  }
  await sftp.end();
  console.log(`ok ${op}`);
})().catch((err) => {
  const key = shown && !known.has(shown) ? ` (host key not among those given: ${shown})` : '';
  console.error(`ssh2-sftp-client ${op} ${remote}: ${err.message}${key}`);
  process.exit(1);
});
