package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/payintake/payintake/notify"
)

// cmdNotifyList prints the delivery log of result notifications: one line
// per event (its latest answer), or with --format json every attempt too.
func cmdNotifyList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("notify list", stderr)
	partner := fs.String("partner", "", "only this partner's events")
	state := fs.String("status", "", "only events in this state: "+strings.Join(notify.States, ", "))
	limit := fs.Int("limit", 100, "at most this many events, newest first")
	return runList(ctx, fs, g, args, stdout, stderr, listing[notify.Event]{
		check: func() error {
			if *state != "" && !slices.Contains(notify.States, *state) {
				return usagef("--status %q: use one of %s", *state, strings.Join(notify.States, ", "))
			}
			if *limit < 1 {
				return usagef("--limit %d: give a positive number", *limit)
			}
			return nil
		},
		fetch: func(e *env) ([]notify.Event, error) {
			return notify.NewStore(e.store.Pool()).List(ctx, notify.Filter{Partner: *partner, State: *state, Limit: *limit})
		},
		header: "ID\tPARTNER\tTYPE\tWEBHOOK-ID\tSTATUS\tATTEMPTS\tLAST ANSWER\tCREATED\tNEXT/DELIVERED\tLAST ERROR",
		row: func(tw io.Writer, ev notify.Event) {
			answer := "-"
			if ev.LastStatus != nil {
				answer = strconv.Itoa(*ev.LastStatus)
			}
			when := "-"
			switch {
			case ev.NextAttemptAt != nil:
				when = "next " + ev.NextAttemptAt.UTC().Format(time.RFC3339)
			case ev.DeliveredAt != nil:
				when = ev.DeliveredAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", ev.ID, ev.PartnerID, ev.Type, ev.WebhookID, ev.State,
				ev.Attempts, answer, ev.CreatedAt.UTC().Format(time.RFC3339), when, orDash(ev.LastError))
		},
	})
}

// cmdNotifyRedeliver queues an event again (same webhook-id and body, a
// fresh retry budget); a running serve sends it within a second.
func cmdNotifyRedeliver(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("notify redeliver", stderr)
	by := fs.String("by", "", "who asks, kept for audit (default: the operating-system user)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("notify redeliver takes one event ID (see notify list)")
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id < 1 {
		return usagef("notify redeliver %q: give an event ID, a number from notify list", pos[0])
	}
	if *by == "" {
		if u, err := user.Current(); err == nil {
			*by = u.Username
		} else {
			*by = "unknown"
		}
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	ev, err := notify.NewStore(e.store.Pool()).Redeliver(ctx, id, *by, time.Now())
	if errors.Is(err, notify.ErrNotFound) {
		return fmt.Errorf("there is no notification event %d: see `payintake notify list`", id)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "event %d (%s %s, webhook-id %s) queued again; a running serve sends it within seconds\n",
		ev.ID, ev.PartnerID, ev.Type, ev.WebhookID)
	return nil
}
