// Package sftpd is the partners' SFTP door: an SSH server whose only
// subsystem is SFTP, showing each partner /inbox to upload and /results to
// download. It knows SSH, SFTP and the partner's view; what an upload
// means is intake's: every received file goes through Intake.Submit, as the
// HTTP door's and the ingest command's do.
package sftpd
