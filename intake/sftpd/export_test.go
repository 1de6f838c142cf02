package sftpd

import (
	"context"

	"golang.org/x/crypto/ssh"
)

// AESHardware tells the tests whether the server prefers AES-GCM here.
var AESHardware = aesHardware

// GlobalRequests starts the loop that answers a connection's global
// requests with answer and returns its settle.
func GlobalRequests(reqs <-chan *ssh.Request, answer func(*ssh.Request)) (settle func(context.Context)) {
	return newGlobalRequests(reqs, answer).settle
}
