package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/payintake/payintake/records"
)

// cmdPartnerTokenList: `partner token list ID [--format json]` shows the
// partner's API tokens (prefix, created, last used, revoked), never a token.
func cmdPartnerTokenList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("partner token list", stderr)
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && isHelp(args[0]) {
			formatFlag(fs)
			return helpError{fs}
		}
		return usagef("use: partner token list ID [--format json]")
	}
	id := args[0]
	return runList(ctx, fs, g, args[1:], stdout, stderr, listing[records.APIToken]{
		fetch: func(e *env) ([]records.APIToken, error) {
			if err := e.needPartner(ctx, id); err != nil {
				return nil, err
			}
			return e.store.APITokens(ctx, id)
		},
		header: "PREFIX\tCREATED\tLAST USED\tREVOKED",
		row: func(tw io.Writer, t records.APIToken) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Prefix, t.CreatedAt.UTC().Format(time.RFC3339), timeOrDash(t.LastUsedAt), timeOrDash(t.RevokedAt))
		},
	})
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// cmdPartnerTokenRevoke: `partner token revoke ID PREFIX` revokes the one
// active token starting with PREFIX; the API answers it with 401 from the
// next request on.
func cmdPartnerTokenRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, g := newFlagSet("partner token revoke", stderr)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("use: partner token revoke ID PREFIX (the prefix `partner token list ID` shows)")
	}
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.needPartner(ctx, pos[0]); err != nil {
		return err
	}
	if err := e.store.RevokeAPIToken(ctx, pos[0], pos[1]); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "API token %s of partner %s revoked: the API refuses it from now on\n", pos[1], pos[0])
	return nil
}
