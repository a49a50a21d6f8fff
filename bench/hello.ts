// The baseline: a bare Express hello world on the same machine.
import express from 'express';

const app = express();
app.get('/', (_req, res) => {
  res.send('hello world');
});
app.listen(Number(process.env.PORT), () => process.stdout.write('listening\n'));
