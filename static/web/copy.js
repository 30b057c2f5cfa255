// "Copy" buttons: <button data-copy="ELEMENT-ID"> copies that element's text (no inline
// handlers: the Content-Security-Policy allows only scripts from our static files).
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  navigator.clipboard.writeText(source.textContent).then(() => {
    button.textContent = "Copied";
  });
});
