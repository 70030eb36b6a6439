// Loads the app's WebAssembly. Relative URLs, so the site works from any sub-path.
import init from './pkg/moescope-app.js';

init().catch((error) => {
  const p = document.createElement('p');
  p.className = 'boot-error';
  p.setAttribute('role', 'alert');
  p.textContent = `MoEscope could not start: ${error}`;
  document.body.append(p);
});
