package sftpd

// AESHardware tells the tests whether the server prefers AES-GCM here.
var AESHardware = aesHardware
