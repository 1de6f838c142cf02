package records

import (
	"crypto/hmac"
	"crypto/sha256"
	"strconv"
)

// WebhookSignature is the Standard Webhooks signature of a message under one
// key: HMAC-SHA256(key, "{webhook-id}.{webhook-timestamp}.{body}"). The
// webhook receiver checks it (intake/httpapi) and result notifications are
// signed with it (package notify); this is the one place the rule is written.
func WebhookSignature(key []byte, id, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// WebhookTimestamp is a webhook-timestamp header value: Unix seconds.
func WebhookTimestamp(unix int64) string { return strconv.FormatInt(unix, 10) }
