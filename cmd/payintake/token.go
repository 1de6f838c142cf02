package main

import (
	"context"
	"fmt"
	"io"
)

// cmdPartnerToken: `partner token ID` issues an API token for the HTTP
// submission API and prints it on its last line (it is shown once: only a
// hash is stored). Earlier tokens keep working; `partner token ID
// --revoke-old` revokes all but the newest, without issuing one.
//
// `partner token list ID` and `partner token revoke ID PREFIX` list and
// revoke tokens one by one (token_list.go).
func cmdPartnerToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "list":
			return cmdPartnerTokenList(ctx, args[1:], stdout, stderr)
		case "revoke":
			return cmdPartnerTokenRevoke(ctx, args[1:], stdout, stderr)
		}
	}
	return partnerCredential(ctx, "token", args, stdout, stderr, credential{
		issue: func(e *env, id string) (string, error) { return e.store.IssueAPIToken(ctx, id) },
		revokeOld: func(e *env, id string) (int64, error) {
			return e.store.RevokeOldAPITokens(ctx, id)
		},
		what: "API token",
		hint: "send it as \"Authorization: Bearer TOKEN\"; it is shown only now",
	})
}

// cmdPartnerWebhookSecret: `partner webhook-secret ID` adds a webhook signing
// secret (whsec_ + base64) and prints it on its last line. The previous
// secrets keep working, so the sender can switch without losing a delivery;
// once it has, `partner webhook-secret ID --revoke-old` revokes all but the
// newest.
func cmdPartnerWebhookSecret(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return partnerCredential(ctx, "webhook-secret", args, stdout, stderr, credential{
		issue: func(e *env, id string) (string, error) {
			// A process with the wrong secret key would seal the new secret
			// under a key the servers do not have: refuse, saying so.
			if err := e.store.CheckWebhookSecrets(ctx); err != nil {
				return "", err
			}
			return e.store.AddWebhookSecret(ctx, id)
		},
		revokeOld: func(e *env, id string) (int64, error) {
			return e.store.RevokeOldWebhookSecrets(ctx, id)
		},
		what: "webhook secret",
		hint: "sign webhooks to POST /v1/webhooks/ID with it (Standard Webhooks); earlier secrets stay valid until --revoke-old",
	})
}

type credential struct {
	issue      func(*env, string) (string, error)
	revokeOld  func(*env, string) (int64, error)
	what, hint string
}

func partnerCredential(ctx context.Context, name string, args []string, stdout, stderr io.Writer, c credential) error {
	fs, g := newFlagSet("partner "+name, stderr)
	revoke := fs.Bool("revoke-old", false, "revoke every "+c.what+" of the partner but the newest, and issue none")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("use: partner %s ID [--revoke-old]", name)
	}
	id := pos[0]
	e, err := g.open(ctx, g.logger(stderr), 2)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.needPartner(ctx, id); err != nil {
		return err
	}
	if *revoke {
		n, err := c.revokeOld(e, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d older %s(s) of partner %s revoked; the newest stays valid\n", n, c.what, id)
		return nil
	}
	secret, err := c.issue(e, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "new %s for partner %s (%s):\n%s\n", c.what, id, c.hint, secret)
	return nil
}
