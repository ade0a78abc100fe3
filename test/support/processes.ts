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

/** Whether a process with this id runs (`kill(pid, 0)`; EPERM: it runs as another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
