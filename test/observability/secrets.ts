/** Secret samples for the log-scrubbing tests (fake values in the real formats). */
/** One example of each secret kind the logger must never print (none of them is a real credential). */
export const SECRET_SAMPLES: Record<string, string> = {
  'slack bot token': 'xoxb-1111111111-2222222222-AbCdEfGhIjKlMnOp',
  'slack user token': 'xoxp-1111111111-2222222222-3333-abcdef0123',
  'slack app token': 'xapp-1-A0FAKEAPP1-3333333333-abcdef0123456789',
  bearer: 'Bearer sk_live_not-a-real-key.0123456789',
  jwt: 'eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJpc3MiOiJrdWJlcm5ldGVzIn0.c2lnbmF0dXJlLXBhcnQ',
  'aws access key id': 'AKIAIOSFODNN7EXAMPLE',
  'aws secret assignment': 'aws_secret_access_key=wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY',
  'url password': 'https://proxyuser:hunter2-pass@proxy.example.com:8443/api/',
};
/** The part of each sample that must not appear. */
export const SECRET_CORES: Record<string, string> = {
  'slack bot token': 'AbCdEfGhIjKlMnOp',
  'slack user token': '3333-abcdef0123',
  'slack app token': 'abcdef0123456789',
  bearer: 'sk_live_not-a-real-key',
  jwt: 'c2lnbmF0dXJlLXBhcnQ',
  'aws access key id': 'AKIAIOSFODNN7EXAMPLE',
  'aws secret assignment': 'wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY',
  'url password': 'hunter2-pass',
};

