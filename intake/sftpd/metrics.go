package sftpd

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/payintake/payintake/records"
)

// Metrics are the drop zone's operator-facing counters: logins, sessions,
// uploads and downloads. The envelopes an upload becomes are counted by
// intake's Metrics, as for every door.
type Metrics struct {
	uploads       *prometheus.CounterVec
	uploadBytes   prometheus.Counter
	uploadStored  *prometheus.CounterVec
	downloads     prometheus.Counter
	downloadBytes prometheus.Counter
	logins        *prometheus.CounterVec
	sessions      prometheus.Gauge
	idleClosed    prometheus.Counter
	loginsClosed  *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_sftp_uploads_total",
			Help: "SFTP uploads by result: received (a new envelope), replay, key_reuse, incomplete (connection dropped), too_large, failed.",
		}, []string{"result"}),
		uploadStored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_sftp_upload_stored_total",
			Help: "SFTP uploads recorded as envelopes by how their bytes reached the database: streamed (while they arrived) or at_close (from the spool after the last write: resumed, temp-named and renamed, or no stream free).",
		}, []string{"how"}),
		uploadBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payintake_sftp_upload_bytes_total",
			Help: "Bytes written by SFTP clients to upload handles.",
		}),
		downloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payintake_sftp_downloads_total",
			Help: "Result files opened for download over SFTP.",
		}),
		downloadBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payintake_sftp_download_bytes_total",
			Help: "Result file bytes read by SFTP clients.",
		}),
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_sftp_logins_total",
			Help: "SSH logins by result (ok, failed, unavailable: refused because keys could not be checked, too_many_sessions: the partner had --sftp-max-sessions open).",
		}, []string{"result"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payintake_sftp_connections",
			Help: "SSH connections currently logged in.",
		}),
		idleClosed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payintake_sftp_idle_closed_total",
			Help: "Logged-in SSH connections closed after --sftp-idle-timeout without SFTP traffic (SSH keepalives do not count).",
		}),
		loginsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payintake_sftp_prelogin_closed_total",
			Help: "Connections closed before login by the pre-login bounds: reason silent (sent nothing), evicted (a newer connection from the address needed the slot of an idle one), full (no slot within the wait), proxy_header (a trusted proxy sent no valid PROXY header, or another source sent one).",
		}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.uploads, m.uploadStored, m.uploadBytes, m.downloads, m.downloadBytes,
			m.logins, m.sessions, m.idleClosed, m.loginsClosed)
	}
	return m
}

// uploadResult is the uploads counter's label for an envelope's status.
func uploadResult(status string) string {
	if status == records.StatusReceived {
		return "received"
	}
	return status
}
