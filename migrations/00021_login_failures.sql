-- +goose Up

-- Failed reviewer logins (console, API), per account name and per client
-- address. After a few failures each further one locks the name or address
-- for longer (records.RecordLoginFailure); a login while locked is refused
-- without checking the password. A successful login clears the rows, and
-- `payintake reviewer unlock NAME` lifts an account's lock.
CREATE TABLE login_failures (
    scope          text NOT NULL CHECK (scope IN ('account', 'address')),
    key            text NOT NULL,
    failures       integer NOT NULL,
    last_failed_at timestamptz NOT NULL,
    locked_until   timestamptz,
    PRIMARY KEY (scope, key)
);

-- +goose Down
DROP TABLE login_failures;
