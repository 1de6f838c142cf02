package review

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/payintake/payintake/intake"
	"github.com/payintake/payintake/normalize"
	"github.com/payintake/payintake/records"
)

// sampleMax bounds a sample uploaded to the console's preview: the first
// rows of an export are what onboarding needs.
const sampleMax = 1 << 20

// sampleTooLarge is what a reviewer whose sample is over sampleMax is told:
// the command line reads a whole file.
func sampleTooLarge() string {
	return fmt.Sprintf("The sample is larger than the %d KiB a preview reads. Send a smaller sample (its first rows are enough to check the columns and codes), "+
		"or check the whole file on the command line: payintake partner profile check PARTNER FILE.", sampleMax>>10)
}

type previewView struct {
	Partners []string
	Partner  string
	File     string
	Fields   []string
	P        *intake.Preview
	Counts   string // "created 2 · rejected 1", in the outcomes' order
	Refused  string // why the file would be refused whole
}

// previewPartners are the partners a reviewer may preview files of.
func (s *Server) previewPartners(r *http.Request, sess records.Session) ([]string, error) {
	ps, err := s.Store.Partners(r.Context())
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, p := range ps {
		if records.InScope(sess.Reviewer.Partners, p.ID) {
			ids = append(ids, p.ID)
		}
	}
	return ids, nil
}

// previewPage shows the form: a partner and a sample file.
func (s *Server) previewPage(w http.ResponseWriter, r *http.Request, sess records.Session) {
	ids, err := s.previewPartners(r, sess)
	if err != nil {
		s.consoleInternal(w, r, err)
		return
	}
	p := basePage(sess, "Preview a file")
	p.V = previewView{Partners: ids, Partner: r.URL.Query().Get("partner"), Fields: normalize.FieldNames}
	s.render(w, r, http.StatusOK, "preview", p)
}

// previewPost reads the uploaded sample as the partner's upload would be
// read (its settings and stored profile) and shows each row's values and
// the outcome it would get today. Nothing is applied or stored.
func (s *Server) previewPost(w http.ResponseWriter, r *http.Request, sess records.Session) {
	ids, err := s.previewPartners(r, sess)
	if err != nil {
		s.consoleInternal(w, r, err)
		return
	}
	v := previewView{Partners: ids, Partner: r.PostFormValue("partner"), Fields: normalize.FieldNames}
	page := basePage(sess, "Preview a file")
	fail := func(status int, msg string) {
		page.Error, page.V = msg, v
		s.render(w, r, status, "preview", page)
	}
	if !slices.Contains(ids, v.Partner) {
		fail(http.StatusBadRequest, "Choose one of your partners.")
		return
	}
	f, hdr, err := r.FormFile("sample")
	if err != nil {
		fail(http.StatusBadRequest, "Choose a sample file to upload.")
		return
	}
	defer f.Close()
	v.File = hdr.Filename
	partner, err := s.Store.Partner(r.Context(), v.Partner)
	if err != nil {
		s.consoleInternal(w, r, err)
		return
	}
	pv, err := intake.New(s.Store, s.Log).PreviewFile(r.Context(), partner, hdr.Filename, f)
	var pe *normalize.ParseError
	switch {
	case errors.As(err, &pe):
		v.Refused = fmt.Sprintf("%s: %s", pe.Err, pe.Message)
	case err != nil:
		s.consoleInternal(w, r, err)
		return
	default:
		v.P = &pv
		var counts []string
		for _, o := range records.Outcomes {
			if n := pv.Counts[string(o)]; n > 0 {
				counts = append(counts, fmt.Sprintf("%s %d", o, n))
			}
		}
		v.Counts = strings.Join(counts, " · ")
	}
	page.V = v
	s.render(w, r, http.StatusOK, "preview", page)
}

// envelopeProfile is the profile version envelope id was read with (nil:
// none).
func (s *Server) envelopeProfile(r *http.Request, id int64) (*records.PartnerProfile, error) {
	env, err := s.Store.Envelope(r.Context(), id)
	if err != nil || env.ProfileVersion == 0 {
		return nil, err
	}
	pr, _, err := s.Store.PartnerProfile(r.Context(), env.PartnerID, env.ProfileVersion)
	if err != nil {
		return nil, err
	}
	return &pr, nil
}
