package dispatch

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// keyVector is one set of key inputs given to Go, Python and Node.
type keyVector struct {
	Partner   string   `json:"t"`
	Employee  string   `json:"emp"`
	Period    string   `json:"pp"`
	Component string   `json:"c"`
	Version   int      `json:"v"`
	Run       int      `json:"run"`
	Lines     []string `json:"lines"`
}

var keyVectors = []keyVector{
	{"acme", "W-1001", "2026-11", "BASE", 1, 1, []string{"pl_a", "pl_b"}},
	{"acme", "Zoë Ångström", "2026-11", "PRIME DE FIN D'ANNÉE", 3, 2, []string{"pl_é"}},
	{"a&b", "<script>alert(\"x\")</script>", "2026>11", "A & B < C", 12, 3, []string{"<", ">", "&"}},
	{"acme", `back\slash "quoted" 'single'`, "2026-11", "  spaced  out  ", 7, 1, []string{" "}},
	{"acme", "日本語の名前 😀", "２０２６-11", "Straße", 2147483647, 9, []string{"x y", "日本"}},
	{"acme", "line\nbreak\ttab\r\x01\x1f\x7f", "2026-11", "sep\u2028para\u2029", 1, 1, []string{"\u2028"}},
	{"acme", "/slash/ and \b\f", "2026-11", "emoji 🧾 surrogate pair", 0, 1, []string{}},
}

const pythonKeys = `
import hashlib, json, sys
for v in json.load(sys.stdin):
    canon = json.dumps({"c": v["c"], "emp": v["emp"], "pp": v["pp"], "t": v["t"], "v": v["v"]},
                       sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    line = "pl_%s_%s_%s" % (v["t"], v["pp"], hashlib.sha256(canon.encode("utf-8")).hexdigest()[:24])
    batch = "batch_%s_%s" % (v["pp"], hashlib.sha256(("%s:%s:%d" % (v["t"], v["pp"], v["run"])).encode("utf-8")).hexdigest()[:20])
    chunk = "ck_" + hashlib.sha256("".join(k + "\n" for k in [batch] + v["lines"]).encode("utf-8")).hexdigest()[:24]
    sys.stdout.buffer.write((json.dumps([canon.encode("utf-8").hex(), line, batch, chunk]) + "\n").encode("utf-8"))
`

const nodeKeys = `
const crypto = require("crypto");
const sha = (s) => crypto.createHash("sha256").update(Buffer.from(s, "utf8")).digest("hex");
const sorted = (o) => Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]));
let input = "";
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  for (const v of JSON.parse(input)) {
    const canon = JSON.stringify(sorted({ t: v.t, v: v.v, pp: v.pp, emp: v.emp, c: v.c }));
    const line = "pl_" + v.t + "_" + v.pp + "_" + sha(canon).slice(0, 24);
    const batch = "batch_" + v.pp + "_" + sha(v.t + ":" + v.pp + ":" + v.run).slice(0, 20);
    const chunk = "ck_" + sha([batch, ...v.lines].map((k) => k + "\n").join("")).slice(0, 24);
    process.stdout.write(JSON.stringify([Buffer.from(canon, "utf8").toString("hex"), line, batch, chunk]) + "\n");
  }
});
`

// TestKeysAcrossLanguages computes every key with Python's json.dumps and
// Node's JSON.stringify and compares them with Go's byte for byte.
func TestKeysAcrossLanguages(t *testing.T) {
	input, err := json.Marshal(keyVectors)
	if err != nil {
		t.Fatal(err)
	}
	var want [][4]string
	for _, v := range keyVectors {
		batch := BatchKey(v.Partner, v.Period, v.Run)
		want = append(want, [4]string{
			hex.EncodeToString(LineCanonical(v.Partner, v.Employee, v.Period, v.Component, v.Version)),
			LineKey(v.Partner, v.Employee, v.Period, v.Component, v.Version),
			batch,
			ChunkKey(batch, v.Lines),
		})
	}
	for _, lang := range []struct {
		name string
		cmd  *exec.Cmd
	}{
		{"python3", exec.Command("python3", "-c", pythonKeys)},
		{"node", exec.Command("node", "-e", nodeKeys)},
	} {
		lang.cmd.Stdin = bytes.NewReader(input)
		var stderr bytes.Buffer
		lang.cmd.Stderr = &stderr
		out, err := lang.cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", lang.name, err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(want) {
			t.Fatalf("%s printed %d results for %d vectors:\n%s", lang.name, len(lines), len(want), out)
		}
		for i, l := range lines {
			var got [4]string
			if err := json.Unmarshal([]byte(l), &got); err != nil {
				t.Fatalf("%s line %d: %v", lang.name, i, err)
			}
			for j, what := range []string{"canonical JSON (hex)", "line key", "batch key", "chunk key"} {
				if got[j] != want[i][j] {
					g, _ := hex.DecodeString(got[0])
					w, _ := hex.DecodeString(want[i][0])
					t.Errorf("vector %d %s: %s gives %q, Go %q\n  %s canonical: %s\n  Go canonical:  %s",
						i, what, lang.name, got[j], want[i][j], lang.name, g, w)
				}
			}
		}
	}
}

// TestSpecExample is the example of SPEC "Outbound dispatch".
func TestSpecExample(t *testing.T) {
	const canon = `{"c":"BASE","emp":"W-1001","pp":"2026-11","t":"acme","v":1}`
	if got := string(LineCanonical("acme", "W-1001", "2026-11", "BASE", 1)); got != canon {
		t.Fatalf("canonical %s, want %s", got, canon)
	}
	sum := sha256.Sum256([]byte(canon))
	if got, want := LineKey("acme", "W-1001", "2026-11", "BASE", 1), "pl_acme_2026-11_"+hex.EncodeToString(sum[:12]); got != want {
		t.Errorf("line key %s, want %s", got, want)
	}
	if LineKey("acme", "W-1001", "2026-11", "BASE", 2) == LineKey("acme", "W-1001", "2026-11", "BASE", 1) {
		t.Error("a new version must get a new key")
	}
	b := sha256.Sum256([]byte("acme:2026-11:1"))
	if got, want := BatchKey("acme", "2026-11", 1), "batch_2026-11_"+hex.EncodeToString(b[:10]); got != want {
		t.Errorf("batch key %s, want %s", got, want)
	}
	c := sha256.Sum256([]byte("batch_x\npl_1\npl_2\n"))
	if got, want := ChunkKey("batch_x", []string{"pl_1", "pl_2"}), "ck_"+hex.EncodeToString(c[:12]); got != want {
		t.Errorf("chunk key %s, want %s", got, want)
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
