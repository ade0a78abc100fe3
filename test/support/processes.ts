/** Small process and port helpers shared by the test setup and the tests that start servers or child processes. */
import { createServer } from 'node:net';

/** A free TCP port on 127.0.0.1 (the OS picks one; there is a small window before the caller binds it). */
export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr !== null ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * A free TCP port on 127.0.0.1 below Linux's default ephemeral range (32768–60999, `net.ipv4.ip_local_port_range`),
 * for a port that several processes bind one after another (a server restarted on the same port): a port from
 * {@link freePort} is an ephemeral one, which any outgoing connection or port-0 listener of the machine may take while
 * it is free between two processes (EADDRINUSE at the restart). Tries random ports in 20000–32767 until one binds.
 */
export async function stablePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_768);
    const free = await new Promise<boolean>((resolve) => {
      const srv = createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

/** Whether a process with this id runs (`kill(pid, 0)`; EPERM: it runs as another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
