package main

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// poolCollector exports the connection pool's statistics (pgxpool.Stat),
// read at scrape time, under names Prometheus's conventions accept
// (`promtool check metrics`): a counter ends in _total, a duration is in
// seconds. IBM's pgxpoolprometheus, used before, names its counters
// pgxpool_acquire_count and its durations in nanoseconds, which promtool
// refuses; its names cannot be changed from outside.
type poolCollector struct {
	pool  *pgxpool.Pool
	stats []poolStat
}

type poolStat struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*pgxpool.Stat) float64
}

// newPoolCollector collects pool's statistics as pgxpool_* with the label
// pool=name.
func newPoolCollector(pool *pgxpool.Pool, name string) *poolCollector {
	labels := prometheus.Labels{"pool": name}
	stat := func(metric, help string, kind prometheus.ValueType, v func(*pgxpool.Stat) float64) poolStat {
		return poolStat{prometheus.NewDesc("pgxpool_"+metric, help, nil, labels), kind, v}
	}
	gauge := func(metric, help string, v func(*pgxpool.Stat) int32) poolStat {
		return stat(metric, help, prometheus.GaugeValue, func(s *pgxpool.Stat) float64 { return float64(v(s)) })
	}
	counter := func(metric, help string, v func(*pgxpool.Stat) int64) poolStat {
		return stat(metric, help, prometheus.CounterValue, func(s *pgxpool.Stat) float64 { return float64(v(s)) })
	}
	seconds := func(metric, help string, v func(*pgxpool.Stat) time.Duration) poolStat {
		return stat(metric, help, prometheus.CounterValue, func(s *pgxpool.Stat) float64 { return v(s).Seconds() })
	}
	return &poolCollector{pool: pool, stats: []poolStat{
		gauge("acquired_conns", "Connections currently acquired from the pool.", (*pgxpool.Stat).AcquiredConns),
		gauge("idle_conns", "Connections currently idle in the pool.", (*pgxpool.Stat).IdleConns),
		gauge("constructing_conns", "Connections being opened.", (*pgxpool.Stat).ConstructingConns),
		gauge("total_conns", "Connections in the pool: acquired, idle and being opened.", (*pgxpool.Stat).TotalConns),
		gauge("max_conns", "The most connections the pool opens.", (*pgxpool.Stat).MaxConns),
		counter("acquires_total", "Successful acquires of a connection from the pool.", (*pgxpool.Stat).AcquireCount),
		seconds("acquire_seconds_total", "Time spent in successful acquires.", (*pgxpool.Stat).AcquireDuration),
		counter("empty_acquires_total", "Successful acquires that waited because the pool had no idle connection.", (*pgxpool.Stat).EmptyAcquireCount),
		seconds("empty_acquire_wait_seconds_total", "Time successful acquires waited because the pool had no idle connection.", (*pgxpool.Stat).EmptyAcquireWaitTime),
		counter("canceled_acquires_total", "Acquires given up because their context ended.", (*pgxpool.Stat).CanceledAcquireCount),
		counter("new_conns_total", "Connections opened.", (*pgxpool.Stat).NewConnsCount),
		counter("max_lifetime_destroys_total", "Connections closed because they reached their maximum lifetime.", (*pgxpool.Stat).MaxLifetimeDestroyCount),
		counter("max_idle_destroys_total", "Connections closed because they were idle for too long.", (*pgxpool.Stat).MaxIdleDestroyCount),
	}}
}

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.stats {
		ch <- s.desc
	}
}

// Collect implements prometheus.Collector: one Stat per scrape, so the
// values of a scrape are of one moment.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stat()
	for _, s := range c.stats {
		ch <- prometheus.MustNewConstMetric(s.desc, s.kind, s.value(st))
	}
}
