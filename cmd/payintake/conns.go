package main

import (
	"fmt"
	"log/slog"
	"net"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payintake/payintake/internal/connlimit"
)

// Defaults of the connection caps (--http-max-conns, --sftp-max-conns and
// their -per-addr). Per address, generous: a partner behind a NAT, or a
// proxy in front of serve, is one address for many clients.
const (
	defaultHTTPMaxConns    = 4096
	defaultHTTPPerAddr     = 256
	defaultSFTPMaxConns    = 1024
	defaultSFTPPerAddr     = 128
	descriptorsForTheRest  = 64 // log files, spool files, listeners, the profiler: beside the database pool
	minConnsOfEitherServer = 8
)

// connCaps fits the caps of the HTTP and SFTP listeners into the process's
// descriptor limit (RLIMIT_NOFILE; Go raises the soft limit to the hard one
// at start): what the database pool and files need is kept aside, and both
// caps are lowered in proportion when the rest is smaller than their sum,
// so that at the caps connections are refused at no cost instead of
// exhausting descriptors (then every accept, and every file and database
// connection the process opens, would fail).
func connCaps(httpLim, sftpLim connlimit.Limits, dbConns int, log *slog.Logger) (connlimit.Limits, connlimit.Limits) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return httpLim, sftpLim
	}
	room := int(min(rl.Cur, 1<<30)) - dbConns - descriptorsForTheRest
	sum := httpLim.Max + sftpLim.Max
	if sum <= room {
		return httpLim, sftpLim
	}
	h := max(minConnsOfEitherServer, room*httpLim.Max/sum)
	s := max(minConnsOfEitherServer, room*sftpLim.Max/sum)
	log.Warn("connection caps lowered to fit the descriptor limit (raise it with ulimit -n or LimitNOFILE=)",
		"nofile", rl.Cur, "http_max_conns", h, "sftp_max_conns", s, "asked", fmt.Sprintf("%d+%d", httpLim.Max, sftpLim.Max))
	httpLim.Max, sftpLim.Max = h, s
	httpLim.PerAddr, sftpLim.PerAddr = min(httpLim.PerAddr, h), min(sftpLim.PerAddr, s)
	return httpLim, sftpLim
}

// capConns wraps a door's listener with its caps, counting the
// connections refused at them in payintake_connections_refused_total.
func capConns(ln net.Listener, lim connlimit.Limits, door string, reg prometheus.Registerer) net.Listener {
	l := connlimit.Listen(ln, lim)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name:        "payintake_connections_refused_total",
		Help:        "Connections closed as soon as accepted because the door had --http-max-conns / --sftp-max-conns open (in all or from the address).",
		ConstLabels: prometheus.Labels{"door": door},
	}, func() float64 { return float64(l.Refused()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "payintake_connections_open",
		Help:        "Connections open on the door's listener.",
		ConstLabels: prometheus.Labels{"door": door},
	}, func() float64 { return float64(l.Open()) }))
	return l
}
