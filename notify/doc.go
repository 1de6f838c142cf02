// Package notify tells partners, without their polling, that something is
// ready for them: a submission's result (submission.processed), a leg
// replay's result (replay.processed) or a review report (review.completed).
// Each event is POSTed, signed as Standard Webhooks says, to the partner's
// notify URL (`payintake partner set ID --notify-url URL`).
//
// The events are written by triggers (migrations/00001_baseline.sql,
// "Notifications") in the very transaction that stores the result or the
// report, keyed by the business event (its type and the envelope or replay
// it is about) under a unique constraint: a result can never commit without
// its event, and a repeat never makes a second one. notify_events is the
// outbox.
//
// A Notifier (run by `payintake serve`) claims due events with SKIP LOCKED,
// so several processes share the work, and POSTs each with a bounded
// timeout, outside any database transaction: processing never waits on a
// partner's server. A claim is a lease: an attempt whose process dies is
// made again when it runs out; one a stopping process cuts (RunUntil, as
// `serve` drains) is released at once, for another process to send. Every
// attempt carries the same webhook-id and body (both stored with the
// event) and a fresh webhook-timestamp and signature. An answer that is not
// 2xx is retried by the rules of vendor dispatch
// (backoff.Retryable, backoff.Delay with Retry-After honoured) until the
// retry budget is spent; then the event is failed, and an operator can send
// it again (`payintake notify redeliver`). Every attempt is logged
// (notify_attempts) and counted in /metrics.
//
// The signing secret is the partner's webhook secret (the one it signs its
// own webhooks with): every active secret signs, so a rotation loses
// nothing. Secrets are read through Notifier.secrets only.
package notify
