package records

import "testing"

func TestResultAndReportNames(t *testing.T) {
	cases := []struct{ upload, result, review string }{
		{"pay.csv", "pay.result.csv", "pay.review.csv"},
		{"pay.2024.txt", "pay.2024.result.csv", "pay.2024.review.csv"},
		{"pay", "pay.result.csv", "pay.review.csv"},
		{".csv", ".result.csv", ".review.csv"}, // as resultFilesSQL's regexp_replace gives
	}
	for _, c := range cases {
		if got := ResultName(c.upload); got != c.result {
			t.Errorf("ResultName(%q) = %q, want %q", c.upload, got, c.result)
		}
		if got := ReviewReportName(c.upload); got != c.review {
			t.Errorf("ReviewReportName(%q) = %q, want %q", c.upload, got, c.review)
		}
	}
}
